"""Plain-text quantities shared by the core summaries and the terminal rendering."""

from __future__ import annotations


def human_bytes(n: float) -> str:
    """Bytes as B / KiB / MiB / GiB / TiB, one decimal above bytes."""
    for suffix in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or suffix == "TiB":
            return f"{n:.0f} {suffix}" if suffix == "B" else f"{n:.1f} {suffix}"
        n /= 1024
    return f"{n} B"


def plural(n: int, word: str) -> str:
    """`1 file`, `2 files`."""
    return f"{n} {word}{'' if n == 1 else 's'}"
