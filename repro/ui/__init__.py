"""The one place that writes to the terminal.

stdout carries results (tables, JSON, verdicts) and, for `repro run`, the command's own
stdout; stderr carries progress, notices, errors and the command's stderr. Colour when
the stream is a terminal, or FORCE_COLOR is set; never when NO_COLOR is set.

What a record says is text from whoever made the capsule (`repro.ui.escape`): every renderer
escapes a result's strings with `escape.terminal` before composing its lines (no control sequence,
colours included), passes its lines through `printable` (which keeps only repro's own colours), and
`out` does once more; `info`, `warn`, `error` and `table` keep no sequence at all, so a capsule's
terminal escapes, colours, carriage returns or bidi overrides are shown as escapes, never obeyed.
The output of a command replayed from a record passes through `contain_output`: its colours and
carriage returns stay, nothing else that moves the cursor or erases.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from repro.ui import escape
from repro.ui.stages import Stages
from repro.units import human_bytes as human_bytes  # re-exported for the renderers

ProgressCallback = Callable[[int, int], None]

_COLOURS = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "dim": "2", "bold": "1", "cyan": "36"}

quiet = False  # set by the CLI for --quiet
verbose = False  # set by the CLI for --verbose

_stages = Stages()
_open_line = {"stdout": False, "stderr": False}  # the command's output ended mid-line there
_gone: set[str] = set()  # streams whose reader went away


_OWN_STYLE = escape.OWN_STYLE
_ANY_STYLE = escape.ANY_STYLE
_RESET = "\x1b[0m"
printable = escape.printable
terminal = escape.terminal


def printable_lines(text: str) -> str:
    """`printable` for each line of a multi-line result (its own newlines kept)."""
    return "\n".join(printable(line) for line in text.split("\n"))


class _Contained:
    """A stream of a replayed command's output made safe to pass on: text, newlines, carriage
    returns, tabs, backspaces and colour sequences go through as they come; every other control
    or invisible character (cursor movement, erasing, bidi overrides) is shown as its escape, so
    the replayed code cannot reach the lines repro printed before it. A sequence split across
    chunks is held until it is whole."""

    _PARTIAL = re.compile(r"\x1b(\[[0-9;]{0,32})?$")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._held = ""

    styled = False  # a colour sequence went through since repro last spoke: reset before it does

    def feed(self, data: bytes) -> bytes:
        text = self._held + self._decoder.decode(data)
        partial = self._PARTIAL.search(text)
        self._held = partial.group() if partial else ""
        text = text[: partial.start()] if partial else text
        shown = printable(text, keep="\n\r\t\b", styles=_ANY_STYLE)
        self.styled = self.styled or bool(_ANY_STYLE.search(shown))
        return shown.encode()


_contained: dict[str, _Contained] | None = None


def contain_output() -> None:
    """From now on, pass the command's output through `_Contained` (a replay of a record)."""
    global _contained
    _contained = {"stdout": _Contained(), "stderr": _Contained()}


def reset() -> None:
    """Forget -q/-v and what was drawn: a command starts afresh."""
    global quiet, verbose, _stages, _contained
    quiet = verbose = False
    _stages = Stages()
    _open_line.update(stdout=False, stderr=False)
    _gone.clear()
    _contained = None


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (a closed or detached stream is not)."""
    try:
        return stream.isatty()
    except (ValueError, OSError):
        return False


def colour_on(stream: TextIO) -> bool:
    """Whether to colour what goes to ``stream``: never with NO_COLOR, always with FORCE_COLOR
    (any non-empty value, https://no-color.org and https://force-color.org), else on a terminal."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return is_terminal(stream)


def line_width(stream: TextIO | None = None) -> int | None:
    """How wide a result line may be: the terminal's columns (COLUMNS wins) when ``stream`` (stdout by
    default) is a terminal; None, never cut, when it is a file, a pipe or a CI log."""
    return terminal_size()[0] if is_terminal(stream or sys.stdout) else None


def terminal_size() -> tuple[int, int]:
    """(columns, lines) of the terminal repro runs in; COLUMNS and LINES win, as in `shutil`."""
    size = shutil.get_terminal_size()
    return size.columns, size.lines


def style(text: str, colour: str, stream: TextIO | None = None) -> str:
    """Wrap text in an ANSI colour when the target stream wants colour."""
    if not colour_on(stream or sys.stdout):
        return text
    return f"\033[{_COLOURS[colour]}m{text}\033[0m"


def out(text: str = "") -> None:
    """A result (one line or several) on stdout."""
    sys.stdout.write(printable_lines(text) + "\n")
    sys.stdout.flush()


def json_out(data: Any) -> None:
    """A JSON document on stdout, the one place the CLI renders one. What a record holds is kept exact
    (a capsule's text is data), and no control character reaches the bytes raw: json.dumps escapes C0,
    and ``ensure_ascii`` every character outside printable ASCII (DEL, C1 such as CSI ``\\x9b``, bidi
    overrides) as ``\\uXXXX``, so a terminal or log viewer shown the answer obeys nothing in it."""
    text = json.dumps(data, indent=2, sort_keys=False, default=str, ensure_ascii=True)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _own_line() -> None:
    """Before one of repro's own lines on stderr: take a stage's live line off the screen, and
    end a line the command left open on the same screen."""
    _stages.clear()
    if _contained is not None and any(c.styled for c in _contained.values()):
        sys.stderr.write(_RESET)  # a colour or concealment the replayed command left on ends here
        for c in _contained.values():
            c.styled = False
    same_screen = is_terminal(sys.stdout) and is_terminal(sys.stderr)
    if _open_line["stderr"] or (_open_line["stdout"] and same_screen):
        sys.stderr.write("\n")
        _open_line["stderr"] = False
        if same_screen:
            _open_line["stdout"] = False


def summary(text: str) -> None:
    """The result line of a command whose stdout is the training command's own (`repro run`): on stderr,
    shown even with --quiet."""
    _own_line()
    sys.stderr.write(terminal(text) + "\n")
    sys.stderr.flush()


def info(text: str) -> None:
    """A one-line notice on stderr."""
    if not quiet:
        _own_line()
        sys.stderr.write(style("repro: ", "dim", sys.stderr) + terminal(text) + "\n")
        sys.stderr.flush()


def warn(text: str) -> None:
    _own_line()
    sys.stderr.write(style("repro: warning: ", "yellow", sys.stderr) + terminal(text) + "\n")
    sys.stderr.flush()


def error(text: str, hint: str | None = None) -> None:
    _own_line()
    # A build's or pip's last lines may follow the message, each on its own line.
    sys.stderr.write(style("repro: error: ", "red", sys.stderr) + escape.terminal_lines(text) + "\n")
    if hint:
        sys.stderr.write(style("  hint: ", "dim", sys.stderr) + terminal(hint) + "\n")
    sys.stderr.flush()


def command_output(data: bytes, to: str = "stdout") -> None:
    """Bytes of the training command's own output, passed through unchanged as they come, to
    repro's stdout or stderr (``to``); --quiet silences repro, never the command."""
    if not data or to in _gone:
        return
    _stages.clear()
    if _contained is not None:
        data = _contained[to].feed(data)
        if not data:
            return
    stream = sys.stdout if to == "stdout" else sys.stderr
    buffer = getattr(stream, "buffer", None)
    try:
        stream.flush()
        if buffer is not None:
            buffer.write(data)
            buffer.flush()
        else:
            stream.write(data.decode("utf-8", "replace"))
            stream.flush()
    except BrokenPipeError:  # `repro run train.py | head`: the reader left; the run goes on, logged
        _gone.add(to)
        _discard(stream)
        return
    _open_line[to] = not data.endswith(b"\n")


def _discard(stream: TextIO) -> None:
    """Point a stream whose reader left at /dev/null, so no later flush (at exit) fails again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def failed_tail(lines: list[str]) -> None:
    """The last stderr lines of the process that failed (already labelled with its rank), on stderr:
    stored lines, so no control sequence of theirs is obeyed."""
    _own_line()
    for line in lines:
        sys.stderr.write(terminal(line) + "\n")
    sys.stderr.flush()


def _stage_prefix() -> str | None:
    return None if quiet else style("repro: ", "dim", sys.stderr)


def stage(label: str) -> None:
    """A build stage begins: one line on stderr, with its time once it ends."""
    _stages.begin(label, _stage_prefix())


def stage_end(label: str = "") -> None:
    """The open build stage ended (``label`` names it with what is known now)."""
    _stages.end(_stage_prefix(), label)


def build_line(text: str) -> None:
    """A raw line of a build or a lock compile: shown with --verbose, else held for a failure."""
    if verbose and not quiet:
        if text.strip():
            _stages.clear()
            sys.stderr.write(style("  build: ", "dim", sys.stderr) + text.rstrip() + "\n")
            sys.stderr.flush()
        return
    _stages.line(text, _stage_prefix())


def build_log(path: str) -> None:
    """Where the full log of the build under way is kept."""
    _stages.log = path


def build_failed(message: str) -> None:
    """A build stage was open when ``message`` ended the command: show its held lines that the message
    does not repeat, and where the full log is."""
    if _stages.label is None and not _stages.held:
        return
    lines = [] if verbose else list(_stages.fail(message))
    for line in lines:
        sys.stderr.write(style("  build: ", "dim", sys.stderr) + printable(line.rstrip()) + "\n")
    if _stages.log:
        sys.stderr.write(style("repro: ", "dim", sys.stderr) + f"the full log: {_stages.log}\n")
    sys.stderr.flush()
    _stages.label, _stages.held = None, []


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
        self._enabled = is_terminal(sys.stderr) and not quiet

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
    rows = [[terminal(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def out_width() -> int | None:
    """The width of the terminal stdout shows on (`COLUMNS` wins), or None when stdout is a pipe or
    a file: there, lines are written whole, never cut."""
    if not sys.stdout.isatty():
        return None
    import shutil

    return shutil.get_terminal_size().columns


def write_document(target: str, text: str) -> None:
    """A rendered document (Markdown) to the file ``target``, or to stdout when it is `-`."""
    body = text.rstrip("\n") + "\n"
    if target == "-":
        sys.stdout.write(body)
        sys.stdout.flush()
        return
    from pathlib import Path

    Path(target).write_text(body, encoding="utf-8")
