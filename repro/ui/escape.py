"""Text from a capsule, escaped for where it is written: one function per target.

A record's strings (paths, params, notes, log lines, metric names, reasons that quote them) are
written by whoever made the capsule. Each target has one function here, and every renderer uses it:

- `terminal`: every control character shown as its escape (`\\x1b`, `\\r`, `\\u202e`), colours
  included, so nothing a capsule says moves the cursor, erases, links or paints; `printable` is the
  same for a line repro composed, keeping repro's own colour sequences. (The live output of a
  replayed command keeps its colours: `repro.ui.contain_output`.)
- `html`: markup escaped, attributes quoted; `svg` and `xml` also drop the characters XML 1.0 cannot
  hold (a JUnit report or an SVG with one is not well-formed).
- `markdown`: HTML and link syntax neutralised (`<script>`, `<img onerror>`, `[x](javascript:…)`,
  `<scheme:…>` autolinks, images), emphasis and table pipes escaped, one line; `markdown_code` for an
  inline code span; `markdown_fence` for a fenced block no line can close.
- `csv`: a cell a spreadsheet would read as a formula (`=`, `+`, `-`, `@`) starts with `'`.
- `scrub_terminal`: a result's every string through `terminal`, before a renderer composes its lines
  (and adds its own colours).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, TypeVar

T = TypeVar("T")

# The colour sequences `ui.style` (and the diff renderer's painter) write; every other escape is shown.
OWN_STYLE = re.compile(r"\x1b\[(?:0|1|2|31|32|33|34|36)m")
# Any colour or attribute (SGR) sequence: what a training command's coloured log lines carry.
ANY_STYLE = re.compile(r"\x1b\[[0-9;]{0,32}m")
_NO_STYLE = re.compile(r"(?!x)x")  # matches nothing


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if ch in "\n\r\t":
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: object, keep: str = "\t", styles: re.Pattern[str] = OWN_STYLE) -> str:
    """``text`` fit for a terminal: every control character (ESC, CR, newline, DEL, C1), bidi
    override or isolate, zero-width or other invisible character shown as its escape (``\\x1b``,
    ``\\r``, ``\\n``, ``\\u202e``); the colour sequences ``styles`` matches (repro's own) and the
    characters in ``keep`` stay.
    """
    text = str(text)
    if text.isprintable():
        return text
    shown, at = [], 0
    for match in [*styles.finditer(text), None]:
        upto = match.start() if match else len(text)
        shown.append("".join(c if c.isprintable() or c in keep else _escape_char(c) for c in text[at:upto]))
        if match:
            shown.append(match.group())
            at = match.end()
    return "".join(shown)


def terminal(text: object) -> str:
    """A capsule's text for a terminal: no control sequence at all, colours included."""
    return printable(text, keep="", styles=_NO_STYLE)


def terminal_lines(text: object) -> str:
    """`terminal` for each line of a capsule's multi-line text (a stored log), its newlines kept."""
    return "\n".join(terminal(line) for line in str(text).split("\n"))


def html(text: object) -> str:
    """Text for HTML (an element's text or a quoted attribute); control characters shown."""
    import html as _html  # on first use: its entity tables are no command line's start-up cost

    return _html.escape(printable(text, keep="\t\n", styles=_NO_STYLE), quote=True)


# Characters XML 1.0 cannot hold, even escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml(text: object) -> str:
    """Text a serializer will escape (ElementTree for JUnit): characters XML 1.0 cannot hold shown
    as their escape; markup is left to the serializer."""
    return _NOT_XML.sub(lambda m: _escape_char(m.group()), str(text))


def svg(text: object) -> str:
    """Text written into SVG by hand: XML-safe, markup escaped."""
    import html as _html

    return _html.escape(xml(printable(text, keep="\t\n", styles=_NO_STYLE)), quote=True)


# `[` and `]` make links and images (`[x](javascript:…)`, `![x](…)`): escaped, no link can form;
# backslash, backtick, emphasis and table pipes too. What only matters at a line's start (`#`, `-`,
# `1.`, `>`) is escaped there.
_MD_PUNCT = re.compile(r"([\\`*_\[\]|])")
_MD_LINE_START = re.compile(r"^(\s*)([-+*>]|#{1,6}|\d{1,9}[.)])(?=\s|$)")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]{1,31}):(?=//|[A-Za-z])")


def markdown(text: object) -> str:
    """Text for Markdown (a paragraph, a list item or a table cell): HTML escaped as entities,
    link, image, emphasis and table syntax backslash-escaped, schemes broken so no renderer makes a
    link of them, one line."""
    flat = terminal(str(text).replace("\r\n", " ").replace("\n", " ").replace("\r", " "))
    out = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = _MD_PUNCT.sub(r"\\\1", out)
    out = _SCHEME.sub(r"\1&#58;", out)
    return _MD_LINE_START.sub(r"\1\\\2", out)


def markdown_code(text: object) -> str:
    """Text for an inline code span (markup is inert there): one line, no backtick, pipes escaped
    for a table."""
    flat = terminal(str(text).replace("\n", " ")).replace("`", "'")
    return "`" + flat.replace("|", "\\|") + "`"


def markdown_fence(lines: list[str], info: str = "") -> list[str]:
    """A fenced block holding ``lines`` verbatim (control characters shown), fenced by more
    backticks than any line holds, so no line can close it."""
    shown = [terminal(line) for line in lines]
    longest = max((len(m) for line in shown for m in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, *shown, fence]


def csv(text: object) -> str:
    """A CSV cell: a value a spreadsheet would run as a formula starts with `'`; controls shown."""
    out = terminal(text)
    return "'" + out if out[:1] in ("=", "+", "-", "@") else out


def scrub_terminal(value: T) -> T:
    """``value`` (a result or record: dataclasses, lists, dicts) with every string passed through
    `terminal`, before a renderer composes its lines around them and adds its own colours."""
    return _scrub(value)  # type: ignore[no-any-return]


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return value if value.isprintable() else terminal(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _scrub(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_scrub(v) for v in value)
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    return value
