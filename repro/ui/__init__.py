"""The one place that writes to the terminal.

stdout carries results (tables, JSON, verdicts); stderr carries progress, logs,
notices and errors. Colour only when the stream is a terminal and NO_COLOR is unset.

What a record says is text from whoever made the capsule: every renderer passes its lines
through `printable`, and `out`, `info`, `warn` and `error` do once more, so a capsule's terminal
escapes, carriage returns or bidi overrides are shown as escapes, never obeyed by the terminal.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from repro.units import human_bytes as human_bytes  # re-exported for the renderers

ProgressCallback = Callable[[int, int], None]

_COLOURS = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "dim": "2", "bold": "1", "cyan": "36"}

quiet = False  # set by the CLI for --quiet


# The colour sequences `style` (and the diff renderer's painter) write; every other escape is shown.
_OWN_STYLE = re.compile(r"\x1b\[(?:0|1|2|31|32|33|34|36)m")
# Any colour or attribute (SGR) sequence: what a training command's coloured log lines carry.
_ANY_STYLE = re.compile(r"\x1b\[[0-9;]{0,32}m")
_RESET = "\x1b[0m"


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch in "\n\r\t":
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: object, keep: str = "\t", styles: re.Pattern[str] = _OWN_STYLE) -> str:
    """``text`` fit for a terminal: every control character (ESC, CR, newline, DEL, C1), bidi
    override or isolate, zero-width or other invisible character shown as its escape (``\\x1b``,
    ``\\r``, ``\\n``, ``\\u202e``); the colour sequences ``styles`` matches (repro's own) and the
    characters in ``keep`` stay.

    The one rule every renderer applies to a line holding a record's strings, so what a capsule
    says cannot move the cursor, erase or reorder what the person reading it sees.
    """
    text = str(text)
    if text.isprintable():
        return text
    shown, at = [], 0
    for match in [*styles.finditer(text), None]:
        upto = match.start() if match else len(text)
        shown.append("".join(c if c.isprintable() or c in keep else _escape(c) for c in text[at:upto]))
        if match:
            shown.append(match.group())
            at = match.end()
    return "".join(shown)


def printable_lines(text: str) -> str:
    """`printable` for each line of a multi-line result (its own newlines kept)."""
    return "\n".join(printable(line) for line in text.split("\n"))


def _tty(stream: TextIO) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR")


def style(text: str, colour: str, stream: TextIO | None = None) -> str:
    """Wrap text in an ANSI colour when the target stream is a terminal."""
    if not _tty(stream or sys.stdout):
        return text
    return f"\033[{_COLOURS[colour]}m{text}\033[0m"


def out(text: str = "") -> None:
    """A result (one line or several) on stdout."""
    sys.stdout.write(printable_lines(text) + "\n")
    sys.stdout.flush()


def json_out(data: Any) -> None:
    """A JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def info(text: str) -> None:
    """A one-line notice on stderr."""
    if not quiet:
        sys.stderr.write(style("repro: ", "dim", sys.stderr) + printable(text) + "\n")
        sys.stderr.flush()


def warn(text: str) -> None:
    sys.stderr.write(style("repro: warning: ", "yellow", sys.stderr) + printable(text) + "\n")
    sys.stderr.flush()


def error(text: str, hint: str | None = None) -> None:
    # A build's or pip's last lines may follow the message, each on its own line.
    sys.stderr.write(style("repro: error: ", "red", sys.stderr) + printable_lines(text) + "\n")
    if hint:
        sys.stderr.write(style("  hint: ", "dim", sys.stderr) + printable(hint) + "\n")
    sys.stderr.flush()


def log_line(text: str, stream: str = "stdout") -> None:
    """A line of the training command's own output, passed through live on stderr."""
    if quiet:
        return
    prefix = style("│ ", "red" if stream == "stderr" else "dim", sys.stderr)
    sys.stderr.write(prefix + _passed_through(text.rstrip("\n")) + "\n")
    sys.stderr.flush()


def _passed_through(text: str) -> str:
    """A line a command printed, fit to pass on: its colours stay, and of a line redrawn with carriage
    returns (a progress bar) the last state, as a terminal would show it; cursor movement, erasing
    and the like are shown as escapes, so the line cannot reach what repro printed before it (a
    replayed capsule's code must not hide its backend line); a colour it leaves on is reset."""
    last = [part for part in text.split("\r") if part.strip()][-1:]
    shown = printable(last[0] if last else "", styles=_ANY_STYLE)
    return shown + _RESET if _ANY_STYLE.search(shown) else shown


def build_line(text: str) -> None:
    """A line of image-build output, dimmed, on stderr."""
    if quiet or not text.strip():
        return
    sys.stderr.write(style("  build: ", "dim", sys.stderr) + _passed_through(text.rstrip()) + "\n")
    sys.stderr.flush()


def byte_progress(label: str) -> ProgressCallback:
    """A (done, total) callback that draws a byte progress bar once the work lasts over a second."""
    bar = Progress(label, unit="B")

    def update(done: int, total: int) -> None:
        bar.update(done - bar.done, total=total)
        if total and done >= total:
            bar.close()

    return update


class Progress:
    """A progress bar on stderr, drawn only on a terminal and only after `delay` seconds."""

    def __init__(self, label: str, total: int | None = None, unit: str = "", delay: float = 1.0) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.done = 0
        self._start = time.monotonic()
        self._delay = delay
        self._last = 0.0
        self._drawn = False
        self._enabled = _tty(sys.stderr) and not quiet

    def update(self, n: int = 1, total: int | None = None) -> None:
        self.done += n
        if total is not None:
            self.total = total
        if not self._enabled:
            return
        now = time.monotonic()
        if now - self._start < self._delay or now - self._last < 0.1:
            return
        self._last = now
        self._draw()

    def _draw(self) -> None:
        if self.total:
            frac = min(1.0, self.done / self.total)
            bar = "#" * int(frac * 30)
            text = f"{self.label} [{bar:<30}] {_human(self.done, self.unit)}/{_human(self.total, self.unit)}"
        else:
            text = f"{self.label} {_human(self.done, self.unit)}"
        sys.stderr.write("\r\033[K" + text)
        sys.stderr.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _human(n: int, unit: str) -> str:
    if unit == "B":
        return human_bytes(n)
    return f"{n}{(' ' + unit) if unit else ''}"


def table(rows: list[list[str]], headers: list[str]) -> str:
    """A plain aligned text table; its cells pass through `printable`."""
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)
