"""The full log of a build: every line a lock compile, a wheel fetch or an image build printed.

The terminal shows one line per stage (`repro.ui.stages`); the lines themselves go to a
file. A run keeps it in its run directory (``runs/<id>/build.log``); a run whose build
failed (its run directory is removed), `repro build` and `repro lock` keep theirs in
``.repro/logs/``, the newest ``KEEP`` of them.
"""

from __future__ import annotations

import contextlib
import os
import time
from datetime import datetime
from pathlib import Path
from typing import IO

from repro.backends.base import Event, OnEvent, terminal_of

LOG_NAME = "build.log"  # in a run directory
LOGS_DIR = "logs"  # in the store directory
KEEP = 20
LOGGED = ("build", "stage", "stage-end")


class BuildLog:
    """An event sink that writes build lines and stages to ``path`` and passes every event on.

    The file is made at the first line; a "build-log" event tells the sink after it where it is.
    """

    def __init__(self, path: Path, on_event: OnEvent) -> None:
        self.path, self.on_event = path, on_event
        self.terminal = terminal_of(on_event)
        self._file: IO[str] | None = None
        self._start = time.monotonic()

    @property
    def written(self) -> bool:
        return self.path.is_file()

    def __call__(self, event: Event) -> None:
        if event.kind in LOGGED:
            self._write(event)
        self.on_event(event)

    def _write(self, event: Event) -> None:
        if self._file is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if self.path.parent.name == LOGS_DIR:
                    _prune(self.path.parent)
                self._file = open(self.path, "a", encoding="utf-8")
            except OSError:
                return  # the log is a convenience: a build never fails for it
            self.on_event(Event("build-log", str(self.path)))
        line = event.text
        if event.kind != "build":
            line = f"== {time.monotonic() - self._start:7.1f}s {event.kind}: {event.text}"
        with contextlib.suppress(OSError):
            self._file.write(line.rstrip("\n") + "\n")
            self._file.flush()

    def failed(self, error: BaseException) -> None:
        """Write what ended the build at the end of its log (only when a log was begun)."""
        if self._file is not None:
            self._write(Event("error", str(error) or type(error).__name__))

    def __enter__(self) -> BuildLog:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: object) -> None:
        if error is not None:
            self.failed(error)
        self.close()

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def keep_in(self, store_dir: Path, name: str) -> Path | None:
        """Move the log to the store's logs directory (its run directory is about to go); where it is now."""
        self.close()
        if not self.written:
            return None
        dest = log_path(store_dir, name)
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            _prune(dest.parent)
            os.replace(self.path, dest)
        except OSError:
            return None
        self.path = dest
        self.on_event(Event("build-log", str(dest)))
        return dest


def log_path(store_dir: Path, name: str) -> Path:
    """Where a new log named ``name`` goes in the store's logs directory (made when written)."""
    now = datetime.now()
    return store_dir / LOGS_DIR / f"{now:%Y%m%d-%H%M%S}.{now.microsecond // 1000:03d}-{name}.log"


def _prune(logs: Path) -> None:
    """Make room for one more log: the newest ``KEEP`` - 1 stay."""
    kept = sorted(logs.glob("*.log"), key=lambda p: p.stat().st_mtime)
    for old in kept[: max(0, len(kept) - KEEP + 1)]:
        old.unlink(missing_ok=True)
