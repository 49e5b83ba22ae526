"""Build progress as one line per stage: what it is, its sizes, how long it took.

A build (a lock compile, the wheelhouse, each image layer) prints hundreds of raw lines;
the terminal gets one line per stage instead, redrawn in place with its elapsed time
while it runs when stderr is a terminal, written once when it ends otherwise. The raw
lines of the open stage are held back: shown with ``-v``, or when the stage fails (the
full log is kept in a file, `repro.backends.buildlog`).
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterable
from typing import TextIO

HELD = 400  # raw lines of the open stage kept for a failure
_REDRAW_S = 0.1


def _elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


class Stages:
    """The open stage, its held lines, and whether its line is drawn on the terminal now."""

    def __init__(self) -> None:
        self.label: str | None = None
        self.started = 0.0
        self.held: list[str] = []
        self.log: str | None = None  # where the full log is kept
        self._drawn = False
        self._drawn_at = 0.0

    @staticmethod
    def _stream() -> TextIO:
        return sys.stderr

    def _live(self) -> bool:
        try:
            return self._stream().isatty()
        except (ValueError, OSError):
            return False

    def begin(self, label: str, prefix: str | None) -> None:
        """A stage begins (the open one ends); ``prefix`` None shows nothing (quiet)."""
        self.end(prefix)
        self.label, self.started, self.held = label, time.monotonic(), []
        if prefix is not None and self._live():
            self._draw(prefix)

    def line(self, text: str, prefix: str | None) -> None:
        """A raw line: held, and the open stage's line redrawn with its elapsed time."""
        self.held.append(text)
        del self.held[:-HELD]
        if prefix is not None and self.label is not None and self._live():
            if time.monotonic() - self._drawn_at >= _REDRAW_S:
                self._draw(prefix)

    def end(self, prefix: str | None, label: str = "") -> None:
        """The open stage ended: its line with the time it took (``label`` names it anew)."""
        if self.label is None:
            return
        text = f"{label or self.label} · {_elapsed(time.monotonic() - self.started)}"
        if prefix is not None:
            self._write(("\r\033[K" if self._drawn else "") + prefix + text + "\n")
        self.label, self.held, self._drawn = None, [], False

    def clear(self) -> None:
        """Take the open stage's live line off the screen before other output (redrawn later)."""
        if self._drawn:
            self._write("\r\033[K")
            self._drawn = False

    def fail(self, shown: str) -> Iterable[str]:
        """The build failed with the message ``shown``: the held lines it does not repeat. The stage
        is closed without a time."""
        self.clear()
        lines = [line for line in self.held if line.strip() and line.strip() not in shown]
        self.label, self.held = None, []
        return lines

    def _draw(self, prefix: str) -> None:
        elapsed = _elapsed(time.monotonic() - self.started)
        text = f"{self.label} … {elapsed}"
        room = shutil.get_terminal_size().columns - len("repro: ") - 1
        if len(text) > room > 10:  # a wrapped line cannot be redrawn in place
            text = text[: room - 1] + "…"
        self._write(f"\r\033[K{prefix}{text}")
        self._drawn, self._drawn_at = True, time.monotonic()

    def _write(self, text: str) -> None:
        stream = self._stream()
        stream.write(text)
        stream.flush()
