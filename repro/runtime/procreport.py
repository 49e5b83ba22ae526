"""Each process of a run reports to its own file in the run's runtime dir: ``proc.<pid>.jsonl``.

Standard library only. One JSON object per line, appended with one ``write(2)`` on an
``O_APPEND`` descriptor as the event happens, so a DataLoader worker that leaves through
``os._exit`` (no atexit) has still reported everything (`repro.runtime.jsonl`). Kinds (``"kind"``;
``"e"`` before it was the one row key):

  boot   the process started under the runtime: pid, ppid, rank, main (the first process)
  w      a file written: ``p`` relative to the project root, or absolute when outside it
  r      a file read under the project root
  seed   the script seeded an RNG itself: api, value, where
  nd     a nondeterministic op alert: op, where, first_step, rank, count so far, fatal
  error  the runtime could not apply its settings to a module, or write a stream: where, error

Every (kind, key) is reported once per process.
"""

from __future__ import annotations

import json
import os
from typing import Any

from repro.runtime import contract, jsonl

_STREAM = contract.STREAMS["report"]
REPORT_PREFIX = _STREAM.file
REPORT_SUFFIX = ".jsonl"

_seen: set[tuple[str, str]] = set()
_MAX_EVENTS = 50000


def report_path(runtime_dir: str, pid: int) -> str:
    return os.path.join(runtime_dir, _STREAM.name(jsonl.NOT_A_RANK, pid))


def _path() -> str | None:
    runtime_dir = os.environ.get(contract.RUNTIME_DIR_ENV)
    return report_path(runtime_dir, os.getpid()) if runtime_dir else None


def _dumps(row: Any) -> str:
    return json.dumps(row, default=str, separators=(",", ":"))


_appender = jsonl.Appender("report", path=_path, dumps=_dumps)


def emit(kind: str, key: str = "", **fields: Any) -> None:
    """Append one event; a (kind, key) already reported by this process is dropped."""
    if key:
        if (kind, key) in _seen or len(_seen) >= _MAX_EVENTS:
            return
        _seen.add((kind, key))
    _appender.write({contract.ROW_KIND: kind, **fields})


def _stream_ended(stream: str, error: str) -> None:
    """A stream the runtime could not write any more (disk full, a removed directory): one error row."""
    emit("error", f"stream:{stream}", where=f"the {stream} stream", error=error)


jsonl.report_problems_to(_stream_ended)
