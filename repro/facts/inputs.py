"""Files a run read that are neither code nor declared data: its inputs all the same.

Each is hashed and recorded as an input (`DataInput.read`), and its bytes kept in the store while the
total stays within ``store.max_input_bytes``; a larger one is named, not kept. A replay restores them
like declared data (`repro.rerun.inputs`), and one it cannot find is named before anything runs.
A file that looks like a credential, by name or by what it holds, is never kept: it is named.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from repro.facts.data import capture_data
from repro.facts.secrets import config_secrets, credential_in_file, is_secret_file
from repro.facts.secrets.files import credential_at
from repro.store.record import DataInput
from repro.store.statcache import HashCache

PutFile = Callable[[Path, str], str]  # (path, digest) -> the stored digest


@dataclass
class ReadInputs:
    """What `record_read` made of the files a run read."""

    inputs: list[DataInput] = field(default_factory=list)
    not_kept: list[tuple[str, int]] = field(default_factory=list)  # over the limit: (path, size)
    secret: list[str] = field(default_factory=list)  # looks like a credential: named, never recorded
    kept_bytes: int = 0


def record_read(
    paths: list[str], root: Path, put_file: PutFile, limit: int, cache: HashCache | None = None
) -> ReadInputs:
    """Record each project-relative file in ``paths`` as an input; keep its bytes (``put_file``) while
    the kept total stays within ``limit`` bytes, smallest first, so one large file leaves the others kept."""
    found = ReadInputs()
    candidates: list[DataInput] = []
    for rel in paths:
        path = root / rel
        if not path.is_file() or path.is_symlink():
            continue  # gone since it was read, or a link to elsewhere: named as read, not recorded
        if _holds_credential(rel, path):
            found.secret.append(rel)
            continue
        candidates += capture_data([rel], root, cache=cache)
    for item in sorted(candidates, key=lambda i: (i.size, i.path)):
        item.read = True
        if found.kept_bytes + item.size <= limit and all(
            put_file(root / f.path, f.hash) == f.hash for f in item.files
        ):
            found.kept_bytes += item.size
        else:
            found.not_kept.append((item.path, item.size))
    found.inputs = sorted(candidates, key=lambda i: i.path)
    return found


def _holds_credential(rel: str, path: Path) -> bool:
    """Whether a file the run read looks like a credential: by its name, a tool's login file by where
    it stands and what it says, a private key or service account in it, or a config whose credential
    keys hold values (`password: …`): its bytes are never kept, whatever the size limit."""
    return (
        is_secret_file(rel)
        or credential_at(path, rel) is not None
        or credential_in_file(path) is not None
        or bool(config_secrets(path))
    )
