"""What exact resume keeps for this process and reads from its environment: the optimizer step count,
the tracked generators, the run's runtime directory, rank and world size, and its resume events.

Events (``restored``, ``missing``) go to ``resume-events.jsonl``.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

from repro.runtime import contract, jsonl

EVENTS = contract.STREAMS["resume_events"].file
_events = jsonl.Appender("resume_events", dumps=lambda row: json.dumps(row, sort_keys=True))

state: dict[str, Any] = {
    "step": 0,
    "restored": False,
    "generators": [],
    "ring": OrderedDict(),
    "marks_seen": set(),
}


def rank() -> int:
    return max(jsonl.rank(), 0)  # the states and rows of a process outside torchrun are rank 0's


def world() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def runtime_dir() -> Path | None:
    d = os.environ.get(contract.RUNTIME_DIR_ENV)
    return Path(d) if d and os.environ.get(contract.RUN_ID_ENV) else None


def resuming() -> bool:
    return bool(os.environ.get(contract.RESUMED_FROM_ENV))


def event(kind: str, **fields: Any) -> None:
    if runtime_dir() is not None:
        _events.write({contract.ROW_KIND: kind, "rank": rank(), **fields})


def set_step(step: int) -> None:
    """Continue counting optimizer steps from a checkpoint's count (`repro.checkpoint.load`)."""
    state["step"] = step
    state["restored"] = True


def current_step() -> int:
    """Optimizer steps taken so far (continued from the checkpoint in a resumed process)."""
    return int(state["step"])
