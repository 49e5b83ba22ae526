"""The per-step fingerprint trace: where two runs first parted, down to the parameter.

With `repro run --trace`, the injected runtime writes one line per optimizer step to
``trace.jsonl``: for every parameter, its float64 sum and sum of absolute values after
the step. Rows name their summation order (``"f": 2``; none in traces of older repro versions,
whose sums were taken in another order): two traces summed alike must agree to the bit; a
trace compared with one summed otherwise agrees up to rounding of the summation. Comparing
two traces finds the first optimizer step and the first parameter whose fingerprint
differs — usually far more telling than the final weights, where every parameter differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from repro.compare.tolerance import Tolerance
from repro.runtime import contract
from repro.store import limits

TRACE_LOG = contract.STREAMS["trace"].log  # the name of the trace in ResultInfo.logs
SUMMATION_KEY = "f"  # a row's summation order (repro/runtime/steptrace.py); absent: the first one
ORDER_RTOL = 1e-12  # of sum |x|: more than two summation orders of the same float64 values part by


TraceDiffKind = Literal["value", "missing", "length"]


@dataclass
class TraceDivergence:
    """The first optimizer step and parameter whose fingerprint differs."""

    step: int
    param: str
    original: list[float] | None  # [sum, sum of |x|]; None where that side has no such entry
    replay: list[float] | None
    within_tolerance: bool
    kind: TraceDiffKind = "value"
    original_steps: int = 0
    replay_steps: int = 0


def parse(text: str) -> list[dict[str, Any]]:
    """Rows of a trace.jsonl text; unreadable lines are skipped."""
    return contract.jsonl_rows(text, lambda row: isinstance(row.get("params"), dict))


def read(raw: bytes | None, cut: list[str] | None = None) -> list[dict[str, Any]]:
    """Rows of a run's trace blob, read no further than `limits.MAX_COMPARED_TRACE_BYTES`; where it
    is cut there, the one line saying so is added to ``cut``."""
    text, was_cut = limits.stream_head(raw, limits.MAX_COMPARED_TRACE_BYTES)
    if was_cut and cut is not None:
        cut.append(limits.cut_note("the step trace", limits.MAX_COMPARED_TRACE_BYTES))
    return parse(text)


def compare_trace(
    original: list[dict[str, Any]], replay: list[dict[str, Any]], tol: Tolerance
) -> TraceDivergence | None:
    """The divergence that decides the verdict (the first beyond tolerance, else the first at all)."""
    first: TraceDivergence | None = None
    counts = {"original_steps": len(original), "replay_steps": len(replay)}
    for a, b in zip(original, replay, strict=False):
        step = int(a.get("step", 0))
        pa, pb = a["params"], b["params"]
        reordered = a.get(SUMMATION_KEY, 1) != b.get(SUMMATION_KEY, 1)
        for name in [*pa, *(n for n in pb if n not in pa)]:
            va, vb = pa.get(name), pb.get(name)
            if va is None or vb is None:
                return TraceDivergence(step, name, va, vb, False, "missing", **counts)
            if va == vb or (reordered and _same_weights(va, vb)):
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


def _same_weights(a: list[float], b: list[float]) -> bool:
    """Fingerprints of traces summed in different orders (an older repro's) that the same weights give."""
    try:
        scale = max(abs(float(a[1])), abs(float(b[1])))
        return all(abs(float(x) - float(y)) <= ORDER_RTOL * scale for x, y in zip(a, b, strict=True))
    except (IndexError, TypeError, ValueError):
        return False


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
