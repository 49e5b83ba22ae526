"""Where both runs have checkpoints, a proof's experiments are windowed replays (`repro.window`): K
optimizer steps of run A from a checkpoint both runs share, instead of whole runs. Pure: chosen from
the records and their per-step traces.

The checkpoint is A's last kept one (its bytes in the store) at or before the first step where A's and
B's traces part: up to it the two runs hold the same parameters, so both continue from it. K defaults
to the steps until that first divergence, plus a margin of 10% of the run's steps (at least 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from repro.compare.tolerance import STRICT
from repro.compare.trace import compare_trace
from repro.store.record import CheckpointInfo, Record

MARGIN = 0.10  # of the run's optimizer steps, added after the first divergence
MIN_MARGIN = 2


@dataclass
class Windowing:
    """How the experiments execute: a window (``checkpoint`` and ``steps``), or whole runs (``why``)."""

    checkpoint: CheckpointInfo | None = None
    steps: int = 0
    diverged_at: int | None = None  # the first optimizer step where A's and B's traces part
    why: str = ""  # whole runs: why no window
    agree: bool = False  # the two traces agree at every step: the runs trained alike

    @property
    def windowed(self) -> bool:
        return self.checkpoint is not None

    def describe(self) -> str:
        """One line for the report."""
        if self.checkpoint is None:
            return f"whole runs: {self.why}"
        first = self.checkpoint.step
        return (
            f"windowed: optimizer steps {first}..{first + self.steps - 1} replayed from checkpoint "
            f"{self.checkpoint.path or self.checkpoint.hash[:12]} (step {first}), where A and B still agree"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order (the proof's ``window``)."""
        info = self.checkpoint
        return {
            "windowed": info is not None,
            "checkpoint": (info.path or info.hash) if info is not None else None,
            "from_step": info.step if info is not None else None,
            "steps": self.steps if info is not None else None,
            "diverged_at": self.diverged_at,
            "why_not": None if info is not None else self.why,
        }


def choose(
    a: Record, b: Record, a_trace: list[dict[str, Any]], b_trace: list[dict[str, Any]], steps: int | None
) -> Windowing:
    """The window the experiments replay, or why they are whole runs. ``steps``: ``--steps K``."""
    if not a_trace or not b_trace:
        untraced = (a if not a_trace else b).id
        return Windowing(why=f"a window is compared by the per-step trace; run {untraced} was not traced")
    if not a.results.checkpoints or not b.results.checkpoints:
        return Windowing(why=f"run {(a if not a.results.checkpoints else b).id} saved no checkpoint")
    parted = compare_trace(a_trace, b_trace, STRICT)
    diverged = parted.step if parted is not None else min(len(a_trace), len(b_trace))
    if parted is None:
        return Windowing(diverged_at=None, agree=True, why=f"the per-step traces of A and B agree at all "
                                                           f"{len(a_trace)} optimizer steps")  # fmt: skip
    kept = [c for c in a.results.checkpoints if c.blob and 0 < c.step <= diverged and c.step < len(a_trace)]
    if not kept:
        return Windowing(
            diverged_at=diverged,
            why=f"runs A and B part at optimizer step {diverged}, before any checkpoint of run A whose bytes "
            "the store kept",
        )
    start = max(kept, key=lambda c: c.step)
    if steps is None:
        steps = diverged - start.step + 1 + max(MIN_MARGIN, math.ceil(MARGIN * len(a_trace)))
        steps = min(steps, len(a_trace) - start.step)
    return Windowing(checkpoint=start, steps=steps, diverged_at=diverged)
