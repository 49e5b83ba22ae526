"""Plain-text quantities shared by the core summaries and the terminal rendering."""

from __future__ import annotations

import re
from typing import Any

# A terminal's control sequences (CSI such as colours and cursor moves, OSC such as titles and links,
# and two-character escapes): what a terminal obeys, and what plain text and JSON never carry.
_TERMINAL_CODES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")


def without_terminal_codes(value: Any) -> Any:
    """``value`` with the terminal's control sequences taken out of every string in it (dicts and
    lists walked): what repro writes of a third-party message (torch bolds parts of its errors) into
    a reason, a verdict or a JSON answer."""
    if isinstance(value, str):
        return _TERMINAL_CODES.sub("", value)
    if isinstance(value, dict):
        return {k: without_terminal_codes(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_terminal_codes(v) for v in value]
    return value


def human_bytes(n: float) -> str:
    """Bytes as B / KiB / MiB / GiB / TiB, one decimal above bytes."""
    for suffix in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or suffix == "TiB":
            return f"{n:.0f} {suffix}" if suffix == "B" else f"{n:.1f} {suffix}"
        n /= 1024
    return f"{n} B"


def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 file`, `2 files`; ``many`` where adding an s is wrong (`2 processes`)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


ELLIPSIS = "…"  # the one mark of a shortened text, everywhere repro shortens one


def shorten(text: str, limit: int | None) -> str:
    """``text`` cut to ``limit`` characters, the last one `…` when it was cut; whole when ``limit`` is
    None (text is cut only for a terminal: `repro.ui.line_width`)."""
    if limit is None or len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + ELLIPSIS
