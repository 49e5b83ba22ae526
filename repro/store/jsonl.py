"""JSON-lines files the runtime writes (traces, resume traces): rows read leniently."""

from __future__ import annotations

import json
from typing import Any


def rows(text: str, key: str, kind: type) -> list[dict[str, Any]]:
    """The objects of a JSON-lines text whose ``key`` holds a ``kind``; unreadable lines are skipped
    (a process killed mid-write leaves half a line)."""
    found: list[dict[str, Any]] = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get(key), kind):
            found.append(row)
    return found
