"""The runtime's own file work on checkpoints: hashing them (a read that is not an input of the run),
naming them by stat, and writing the RNG-state files under ``rng/`` whole.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

from repro.runtime import contract

_local = threading.local()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The checkpoint's hash; this read is the runtime's own, not an input of the run."""
    with own_open(path) as f:
        return sha256_of(f)


def sha256_of(f: Any) -> str:
    """Hash an open file from its start (hashlib lets other threads run while it digests)."""
    h = hashlib.sha256()
    buffer = bytearray(1 << 20)
    view = memoryview(buffer)
    f.seek(0)
    while n := f.readinto(buffer):
        h.update(view[:n])
    return h.hexdigest()


def own_open(path: str | os.PathLike[str]) -> Any:
    """Open a checkpoint for the runtime's own read (the audit hook leaves this open out)."""
    _local.hashing = True
    try:
        return open(path, "rb")
    finally:
        _local.hashing = False


def hashing() -> bool:
    """Whether this thread of the runtime is opening a checkpoint (the audit hook leaves that read out)."""
    return bool(getattr(_local, "hashing", False))


def durable_write(path: Path, text: str) -> None:
    """Whole or not at all (rename). No fsync: a SIGKILL keeps what was written, and a node that loses
    its page cache loses the checkpoint it just wrote as well."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def stat_key(path: str | os.PathLike[str]) -> str:
    """A name for a file's content known without reading it: size and mtime (a rename keeps both)."""
    st = os.stat(path)
    return f"stat-{st.st_size}-{st.st_mtime_ns}"


def state_path(d: Path, digest: str, rank: int) -> Path:
    return d / contract.RNG_DIR / f"{digest}.rank{rank}.json"


def shown_path(path: str | os.PathLike[str]) -> str:
    full = os.path.abspath(path)
    root = os.environ.get(contract.PROJECT_ROOT_ENV)
    if root and full.startswith(os.path.abspath(root) + os.sep):
        return os.path.relpath(full, os.path.abspath(root))
    return os.fspath(path)
