"""Each process of a run reports to its own file in the run's runtime dir: ``proc.<pid>.jsonl``.

Standard library only. One JSON object per line, appended with one ``write(2)`` on an
``O_APPEND`` descriptor as the event happens, so a DataLoader worker that leaves through
``os._exit`` (no atexit) has still reported everything. Kinds (``"e"``):

  boot   the process started under the runtime: pid, ppid, rank, main (the first process)
  w      a file written: ``p`` relative to the project root, or absolute when outside it
  r      a file read under the project root
  seed   the script seeded an RNG itself: api, value, where
  nd     a nondeterministic op alert: op, where, first_step, rank, count so far, fatal
  error  the runtime could not apply its settings to a module: where, error

Every (kind, key) is reported once per process.
"""

from __future__ import annotations

import json
import os
from typing import Any

from repro.runtime import contract

REPORT_PREFIX = "proc."
REPORT_SUFFIX = ".jsonl"

_fd: dict[str, int] = {}  # "pid" and "fd" of the open report, reopened after a fork
_seen: set[tuple[str, str]] = set()
_MAX_EVENTS = 50000


def report_path(runtime_dir: str, pid: int) -> str:
    return os.path.join(runtime_dir, f"{REPORT_PREFIX}{pid}{REPORT_SUFFIX}")


def _descriptor() -> int | None:
    runtime_dir = os.environ.get(contract.RUNTIME_DIR_ENV)
    if not runtime_dir:
        return None
    pid = os.getpid()
    if _fd.get("pid") != pid:
        try:
            fd = os.open(report_path(runtime_dir, pid), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError:
            return None
        _fd.update(pid=pid, fd=fd)
    return _fd["fd"]


def emit(kind: str, key: str = "", **fields: Any) -> None:
    """Append one event; a (kind, key) already reported by this process is dropped."""
    if key:
        if (kind, key) in _seen or len(_seen) >= _MAX_EVENTS:
            return
        _seen.add((kind, key))
    fd = _descriptor()
    if fd is None:
        return
    line = json.dumps({"e": kind, **fields}, default=str, separators=(",", ":")) + "\n"
    try:
        os.write(fd, line.encode("utf-8", "replace"))
    except OSError:
        pass
