"""A command's output as it comes: into the run's log files, and on as "output" events.

Bytes are passed on the moment they arrive, so a partial line shows while the script
sleeps and a progress bar redraws in place. The log files hold the script's own bytes,
``\\r`` redraws included (a comparison reads each line's last state). From a stream that
had a pseudo-terminal the terminal's control sequences (colours, cursor moves) are left
out of the log, so a run made at a terminal records the text a run into a pipe records.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from repro.backends.base import Event, OnEvent

# ESC [ … final, ESC ] … BEL or ESC \, ESC with intermediates and a final (ECMA-48).
_SEQUENCE = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[ -/]*[0-~])")
_UNFINISHED = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?|[ -/]*)\Z")
_LONGEST = 4096  # a longer "sequence" is text with a stray ESC in it


class ControlStripper:
    """Removes terminal control sequences from a byte stream that arrives in pieces."""

    def __init__(self) -> None:
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        data = self._held + data
        self._held = b""
        open_ = _UNFINISHED.search(data)
        if open_ is not None and len(data) - open_.start() < _LONGEST:
            data, self._held = data[: open_.start()], data[open_.start() :]
        return _SEQUENCE.sub(b"", data)

    def flush(self) -> bytes:
        rest, self._held = self._held, b""
        return rest


class CommandOutput:
    """Writes each stream's bytes to its log file and reports them as "output" events.

    A write that fails (a full disk) is kept in ``failures`` for the caller to raise once
    the command ended; the output is still passed on, so the command is never blocked.
    """

    def __init__(
        self, paths: dict[str, Path], on_event: OnEvent, ttys: Iterable[str] = (), mode: str = "ab"
    ) -> None:
        self.paths, self.on_event, self.mode = paths, on_event, mode
        self.failures: list[OSError] = []
        self._muted = False
        self._files: dict[str, IO[bytes] | None] = {}
        self._strip = {name: ControlStripper() for name in ttys}
        for name in paths:
            self._open(name)

    def _open(self, name: str) -> None:
        path = self.paths[name]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._files[name] = open(path, self.mode)
        except OSError as e:
            self.failures.append(OSError(e.errno, e.strerror, str(path)))
            self._files[name] = None

    def write(self, stream: str, data: bytes) -> None:
        """Log and pass on one chunk of ``stream`` ("stdout" or "stderr")."""
        if not data:
            return
        stripper = self._strip.get(stream)
        self._log(stream, stripper.feed(data) if stripper else data)
        if not self._muted:
            self.on_event(Event("output", stream=stream, data=data))

    def mute(self) -> None:
        """Stop passing output on (whoever showed it failed); the logs still get every byte."""
        self._muted = True

    def _log(self, stream: str, data: bytes) -> None:
        f = self._files.get(stream)
        if f is None or not data:
            return
        try:
            f.write(data)
            f.flush()
        except OSError as e:
            self.failures.append(OSError(e.errno, e.strerror, str(self.paths[stream])))  # name the file
            _close_quietly(f)
            self._files[stream] = None

    def close(self) -> None:
        for stream, stripper in self._strip.items():
            self._log(stream, stripper.flush())
        for f in self._files.values():
            _close_quietly(f)
        self._files = {}


def _close_quietly(f: IO[bytes] | None) -> None:
    if f is not None:
        try:
            f.close()
        except OSError:
            pass
