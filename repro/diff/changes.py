"""Changes between two values or two dicts, and how one change reads in a summary."""

from __future__ import annotations

import json
import math
from typing import Any

from repro.diff.model import Change


def same(x: Any, y: Any) -> bool:
    """Whether two values are equal, NaN counting as equal to NaN."""
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return bool(x == y)


def scalar(key: str, old: Any, new: Any, scope: str = "") -> list[Change]:
    """A `changed` (or added/removed) change when two values differ."""
    if same(old, new):
        return []
    if old is None or old == "" or old == [] or old == {}:
        kind = "added"
    elif new is None or new == "" or new == [] or new == {}:
        kind = "removed"
    else:
        kind = "changed"
    return [Change(key=key, kind=kind, scope=scope, old=old, new=new, delta=_delta(old, new))]


def _delta(old: Any, new: Any) -> float | None:
    if isinstance(old, bool) or isinstance(new, bool):
        return None
    if isinstance(old, int | float) and isinstance(new, int | float):
        d = new - old
        return d if isinstance(d, int) else float(d)
    return None


def dict_changes(a: dict[str, Any], b: dict[str, Any], scope: str, prefix: str = "") -> list[Change]:
    """Added, removed and changed keys between two dicts, sorted by key."""
    changes: list[Change] = []
    for key in sorted(set(a) | set(b)):
        if key not in b:
            changes.append(Change(key=prefix + key, kind="removed", scope=scope, old=a[key]))
        elif key not in a:
            changes.append(Change(key=prefix + key, kind="added", scope=scope, new=b[key]))
        else:
            changes.extend(scalar(prefix + key, a[key], b[key], scope))
    return changes


def fmt_value(value: Any) -> str:
    """A value as a short string for a summary (``—`` for None)."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | dict):
        return json.dumps(value, default=str)
    return str(value)


def change_phrase(c: Change) -> str:
    """One change as a summary phrase (``lr 0.1 → 0.2``, ``x = 1 (added)``)."""
    if c.scope == "config":
        return f"{c.key} {c.kind}"
    name = c.key
    if c.kind == "added":
        return f"{name} = {fmt_value(c.new)} (added)"
    if c.kind == "removed":
        return f"{name} = {fmt_value(c.old)} (removed)"
    return f"{name} {fmt_value(c.old)} → {fmt_value(c.new)}"
