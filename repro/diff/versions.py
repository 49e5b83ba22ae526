"""Package pins and versions for the diff: re-exported from their one home, `repro.facts.lockfile`."""

from __future__ import annotations

from collections.abc import Iterable

from repro.facts.lockfile import canonical_name, compare_versions, pins


def parse_pins(lines: Iterable[str]) -> dict[str, str]:
    """``name==version`` lines (requirements, lockfile, pip freeze) → {canonical name: version}."""
    return pins(lines)


__all__ = ["canonical_name", "compare_versions", "parse_pins"]
