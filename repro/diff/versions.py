"""Package pins and versions: parse ``name==version`` lines, order two versions."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*===?\s*([^\s;\\#]+)")


def canonical_name(name: str) -> str:
    """PEP 503 normalised package name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pins(lines: Iterable[str]) -> dict[str, str]:
    """``name==version`` lines (requirements, lockfile, pip freeze) → {canonical name: version}."""
    pins: dict[str, str] = {}
    for line in lines:
        m = _REQ.match(line)
        if m:
            pins[canonical_name(m.group(1))] = m.group(2)
    return pins


def compare_versions(old: str, new: str) -> int:
    """-1, 0 or 1 as ``old`` is lower than, equal to or higher than ``new`` (PEP 440 where it parses)."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - packaging ships with pip-tools
        return _fallback_compare(old, new)
    try:
        va, vb = Version(old), Version(new)
    except InvalidVersion:
        return _fallback_compare(old, new)
    return (va > vb) - (va < vb)


def _fallback_compare(old: str, new: str) -> int:
    def key(v: str) -> list[tuple[int, Any]]:
        return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[.+\-_]", v) if p]

    ka, kb = key(old), key(new)
    return (ka > kb) - (ka < kb)
