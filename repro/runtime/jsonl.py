"""The one JSON-lines appender behind every stream the runtime writes (`contract.STREAMS`), and the
one reader of the process's torchrun rank.

Standard library only. An `Appender` names its file from the contract and the rank, read once when
it opens; writes each row with one ``write(2)`` on an ``O_APPEND`` descriptor, or buffers rows and
writes them at most every `flush_seconds` / `flush_bytes` / `flush_rows` (and at `flush`),
a row given to `write_later` written out only then; is
fork-safe (a forked child, a DataLoader worker, never writes the parent's buffered rows and opens
its own descriptor); may be bounded (``max_bytes``: the stream ends with one ``truncated`` row);
and never raises into the user's code: an ``OSError`` (disk full, a removed directory) ends the
stream, reported once as the runtime reports its problems (a process report's ``error`` row).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from repro.runtime import contract

NOT_A_RANK = -1  # the process is not a torchrun rank; each stream's naming says what that means

_problems: list[Callable[[str, str], None]] = []  # where a stream's end is reported (procreport)


def rank() -> int:
    """This process's torchrun rank (``RANK``), or `NOT_A_RANK` outside torchrun (or unreadable)."""
    text = os.environ.get("RANK", "").strip()
    return int(text) if text.lstrip("-").isdigit() else NOT_A_RANK


def local_rank() -> int:
    """This process's rank on its node (``LOCAL_RANK``); 0 outside torchrun."""
    text = os.environ.get("LOCAL_RANK", "").strip()
    return int(text) if text.lstrip("-").isdigit() else 0


def report_problems_to(callback: Callable[[str, str], None]) -> None:
    """Where a stream that ended on an ``OSError`` is reported: ``callback(stream, error)``."""
    _problems[:] = [callback]


def runtime_dir() -> str | None:
    """``$REPRO_RUNTIME_DIR`` when this process belongs to a repro run, else None."""
    d = os.environ.get(contract.RUNTIME_DIR_ENV)
    return d if d and os.environ.get(contract.RUN_ID_ENV) else None


def stream_path(stream: str, directory: str | None = None) -> str | None:
    """The file this process appends ``stream`` (a `contract.STREAMS` key) to; None outside a run."""
    directory = directory or runtime_dir()
    if directory is None:
        return None
    return os.path.join(directory, contract.STREAMS[stream].name(rank(), os.getpid()))


class _Later(NamedTuple):
    """A row kept as it was given, written out when the buffer is (`Appender.write_later`)."""

    row: Any


class Appender:
    """Rows of one stream appended to one file (`stream_path`, or ``path`` when given)."""

    def __init__(
        self,
        stream: str,
        *,
        path: str | Callable[[], str | None] | None = None,
        flush_seconds: float | None = None,
        flush_bytes: int = 0,
        flush_rows: int = 0,
        max_bytes: int | None = None,
        truncated: Callable[[], dict[str, Any]] | None = None,
        on_end: Callable[[], None] | None = None,
        dumps: Callable[[Any], str] = json.dumps,
    ) -> None:
        self.stream, self.fixed_path, self.dumps = stream, path, dumps
        self.buffered = flush_seconds is not None or flush_bytes > 0 or flush_rows > 0
        self.flush_seconds, self.flush_bytes, self.flush_rows = flush_seconds, flush_bytes, flush_rows
        self.max_bytes, self.truncated, self.on_end = max_bytes, truncated, on_end
        self.ended = False
        self._pid, self._fd, self._open_path = os.getpid(), -1, ""
        self._lines: list[str | _Later] = []
        self._size, self._written, self._last = 0, 0, time.monotonic()

    def path(self) -> str | None:
        """The file rows go to now (a stream that follows ``$REPRO_RUNTIME_DIR`` asks each time)."""
        if callable(self.fixed_path):
            return self.fixed_path()
        return self.fixed_path if self.fixed_path is not None else stream_path(self.stream)

    def write(self, row: dict[str, Any]) -> None:
        """Append one row (buffered or at once, as the stream does); never raises."""
        if self.ended:
            return
        try:
            line = self.dumps(row) + "\n"
        except (TypeError, ValueError):
            return
        self.write_line(line)

    def write_line(self, line: str) -> None:
        """Append one row already written out as a JSON line (ending in a newline); never raises."""
        if self.ended:
            return
        self._forked()
        if not self.buffered:
            self._emit(line)
            return
        self._keep(line, len(line))

    def write_later(self, row: Any, size: int) -> None:
        """Append one row that is written out (``dumps``) only when the buffer is, in one loop: for
        a stream whose writer runs in a hot path (the step trace) and whose rows cost more to write
        out there than together. ``size`` is about the bytes it will take (for ``flush_bytes``);
        never raises."""
        if self.ended:
            return
        self._forked()
        if not self.buffered:
            self.write(row)
            return
        self._keep(_Later(row), size)

    def _keep(self, entry: str | _Later, size: int) -> None:
        self._lines.append(entry)
        self._size += size
        if (
            (self.flush_bytes and self._size >= self.flush_bytes)
            or (self.flush_rows and len(self._lines) >= self.flush_rows)
            or (self.flush_seconds is not None and time.monotonic() - self._last >= self.flush_seconds)
        ):
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows (at exit, and before the runtime ends the process itself)."""
        self._forked()
        lines, self._lines, self._size, self._last = self._lines, [], 0, time.monotonic()
        if lines and not self.ended:
            out = self._written_out
            self._emit("".join(line if isinstance(line, str) else out(line.row) for line in lines))

    def _written_out(self, row: Any) -> str:
        """A `write_later` row as its line ("" for one ``dumps`` cannot write, as `write` drops it)."""
        try:
            return self.dumps(row) + "\n"
        except (TypeError, ValueError):
            return ""

    def end(self, row: dict[str, Any]) -> None:
        """Append a last row (past the byte cap if need be) and write nothing more."""
        self._forked()
        if self.ended:
            return
        self._lines.append(self.dumps(row) + "\n")
        cap, self.max_bytes = self.max_bytes, None
        self.flush()
        self.max_bytes = cap
        if not self.ended:
            self.ended = True
            self._finish()

    def close(self) -> None:
        """Write what is buffered and let go of the file."""
        self.flush()
        self._release()

    def _forked(self) -> None:
        """A forked child drops the parent's buffered rows and opens its own descriptor."""
        if self._pid != os.getpid():
            self._pid, self._fd, self._open_path = os.getpid(), -1, ""
            self._lines, self._size, self._written = [], 0, 0

    def _emit(self, text: str) -> None:
        if self.max_bytes is not None and self._written + len(text) > self.max_bytes:
            row = self.truncated() if self.truncated is not None else {"truncated": True}
            text = json.dumps(row) + "\n"
            self.ended = True
        try:
            fd = self._descriptor()
            if fd < 0:
                return
            data = text.encode("utf-8", "replace")
            while data:
                data = data[os.write(fd, data) :]
            self._written += len(text)
        except OSError as e:
            self._end_on(e)
            return
        if self.ended:
            self._finish()

    def _descriptor(self) -> int:
        path = self.path()
        if path is None:
            return -1
        if self._fd < 0 or path != self._open_path:
            self._release()
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self._open_path = path
        return self._fd

    def _release(self) -> None:
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
        self._fd, self._open_path = -1, ""

    def _end_on(self, error: OSError) -> None:
        self.ended = True
        self._lines, self._size = [], 0
        self._release()
        for callback in _problems:
            try:
                callback(self.stream, f"{type(error).__name__}: {error}"[:300])
            except Exception:
                pass
        self._finish()

    def _finish(self) -> None:
        self._release()
        if self.on_end is not None:
            self.on_end()
