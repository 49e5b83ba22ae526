"""The per-step fingerprint trace: where two runs first parted, down to the parameter.

With `repro run --trace`, the injected runtime writes one line per optimizer step to
``trace.jsonl``: for every parameter, its float64 sum and sum of absolute values after
the step. Comparing two traces finds the first optimizer step and the first
parameter whose fingerprint differs — usually far more telling than the final
weights, where every parameter differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from repro.compare.tolerance import Tolerance
from repro.runtime import contract

TRACE_LOG = "trace"  # the name of the trace in ResultInfo.logs


@dataclass
class TraceDivergence:
    """The first optimizer step and parameter whose fingerprint differs."""

    step: int
    param: str
    original: list[float] | None  # [sum, sum of |x|]; None where that side has no such entry
    replay: list[float] | None
    within_tolerance: bool
    kind: str = "value"  # value | missing | length
    original_steps: int = 0
    replay_steps: int = 0


def parse(text: str) -> list[dict[str, Any]]:
    """Rows of a trace.jsonl text; unreadable lines are skipped."""
    return contract.jsonl_rows(text, lambda row: isinstance(row.get("params"), dict))


def compare_trace(
    original: list[dict[str, Any]], replay: list[dict[str, Any]], tol: Tolerance
) -> TraceDivergence | None:
    """The divergence that decides the verdict (the first beyond tolerance, else the first at all)."""
    first: TraceDivergence | None = None
    counts = {"original_steps": len(original), "replay_steps": len(replay)}
    for a, b in zip(original, replay, strict=False):
        step = int(a.get("step", 0))
        pa, pb = a["params"], b["params"]
        for name in [*pa, *(n for n in pb if n not in pa)]:
            va, vb = pa.get(name), pb.get(name)
            if va is None or vb is None:
                return TraceDivergence(step, name, va, vb, False, "missing", **counts)
            if va == vb:
                continue
            close = all(tol.close(float(x), float(y)) for x, y in zip(va, vb, strict=False))
            found = TraceDivergence(step, name, va, vb, close, "value", **counts)
            if not close:
                return found
            first = first or found
    if first is None and len(original) != len(replay):
        shorter = min(len(original), len(replay))
        return TraceDivergence(shorter, "", None, None, False, "length", **counts)
    return first


def describe(d: TraceDivergence) -> str:
    """One line for a person."""
    if d.kind == "length":
        return f"the traces have {d.original_steps} vs {d.replay_steps} optimizer steps"
    if d.kind == "missing":
        side = "replay" if d.original is not None else "original"
        return f"parameter {d.param} is missing from the {side}'s trace at optimizer step {d.step}"
    assert d.original is not None and d.replay is not None
    return (
        f"parameter {d.param} first differs at optimizer step {d.step} "
        f"(sum {d.original[0]!r} → {d.replay[0]!r})"
    )
