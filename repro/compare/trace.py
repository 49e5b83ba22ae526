"""The per-step fingerprint trace: where two runs first parted, down to the parameter.

With `repro run --trace`, the injected runtime writes one line per optimizer step to
``trace.jsonl``: for every parameter, after the step, ``[sum, bits]``: ``bits`` an exact digest of
its bytes, which decides whether two runs hold the same weights, at every step; ``sum`` the sum of
its values, which a tolerance compares, at every 8th step (rows with ``"f": 4``; ``null`` at the
others) or every step (``"f": 3``). A difference of the digests at a step without sums is judged
by the tolerance at the next step that has them. Rows of older repro versions (``"f": 2``, or none)
hold ``[sum, sum of |x|]`` in float64, summed in another order: two such traces summed alike must
agree to the bit; traces written otherwise agree up to the rounding of their sums, compared at the
steps where both have sums. Comparing two traces finds the first optimizer step and the first
parameter whose fingerprint differs — usually far more telling than the final weights, where every
parameter differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from repro.compare.tolerance import Tolerance
from repro.runtime import contract
from repro.store import limits

TRACE_LOG = contract.STREAMS["trace"].log  # the name of the trace in ResultInfo.logs
SUMMATION_KEY = "f"  # what a row's entries hold (repro/runtime/steptrace.py); absent: the first kind
BITS = 3  # from this "f" on, an entry is [sum, bits]; before it, [sum, sum of |x|]
ORDER_RTOL = 1e-12  # of sum |x|: more than two summation orders of the same float64 values part by
FLOAT32_RTOL = 1e-6  # of sum |x|: more than float32- and float64-accumulated sums of the same values part by


TraceDiffKind = Literal["value", "missing", "length"]


@dataclass
class TraceDivergence:
    """The first optimizer step and parameter whose fingerprint differs."""

    step: int
    param: str
    original: list[Any] | None  # [sum, bits] or [sum, sum of |x|]; None where that side has no such entry
    replay: list[Any] | None
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
        kinds = (a.get(SUMMATION_KEY, 1), b.get(SUMMATION_KEY, 1))
        for name in [*pa, *(n for n in pb if n not in pa)]:
            va, vb = pa.get(name), pb.get(name)
            if va is None or vb is None:
                return TraceDivergence(step, name, va, vb, False, "missing", **counts)
            if va == vb or _same_weights(va, vb, kinds):
                continue
            close = _close(va, vb, kinds, tol)
            found = TraceDivergence(step, name, va, vb, close, "value", **counts)
            if not close:
                return found
            first = first or found
    if first is None and len(original) != len(replay):
        shorter = min(len(original), len(replay))
        return TraceDivergence(shorter, "", None, None, False, "length", **counts)
    return first


def _same_weights(a: list[Any], b: list[Any], kinds: tuple[Any, Any]) -> bool:
    """Fingerprints of different entries, or of sums taken in different orders, that the same weights
    give; an older trace's sums against a step of a new one without them count as the same (the
    steps with sums decide)."""
    try:
        if _has_bits(kinds[0]) and _has_bits(kinds[1]):  # only the bits may show the same weights
            return int(a[1]) == int(b[1])
        if _has_bits(kinds[0]) or _has_bits(kinds[1]):  # an older trace against a new one: the sums
            if a[0] is None or b[0] is None:
                return True
            scale = abs(float((b if _has_bits(kinds[0]) else a)[1]))
            return abs(float(a[0]) - float(b[0])) <= FLOAT32_RTOL * scale
        if kinds[0] == kinds[1]:  # two older traces summed alike: to the bit
            return False
        scale = max(abs(float(a[1])), abs(float(b[1])))
        return all(abs(float(x) - float(y)) <= ORDER_RTOL * scale for x, y in zip(a, b, strict=True))
    except (IndexError, TypeError, ValueError):
        return False


def _close(a: list[Any], b: list[Any], kinds: tuple[Any, Any], tol: Tolerance) -> bool:
    """Whether fingerprints that are not of the same weights are within tolerance (their sums); a
    step without sums is, till the next step with them says otherwise."""
    try:
        if _has_bits(kinds[0]) and _has_bits(kinds[1]) and tol.atol == 0 and tol.rtol == 0:
            return False  # exact: other bits are other weights
        if _has_bits(kinds[0]) or _has_bits(kinds[1]):
            return a[0] is None or b[0] is None or tol.close(float(a[0]), float(b[0]))
        return all(tol.close(float(x), float(y)) for x, y in zip(a, b, strict=False))
    except (IndexError, TypeError, ValueError):
        return False


def _has_bits(kind: Any) -> bool:
    return isinstance(kind, int) and kind >= BITS


def describe(d: TraceDivergence) -> str:
    """One line for a person."""
    if d.kind == "length":
        return f"the traces have {d.original_steps} vs {d.replay_steps} optimizer steps"
    if d.kind == "missing":
        side = "replay" if d.original is not None else "original"
        return f"parameter {d.param} is missing from the {side}'s trace at optimizer step {d.step}"
    assert d.original is not None and d.replay is not None
    sums = d.original[0], d.replay[0]
    what = f"sum {sums[0]!r} → {sums[1]!r}" if None not in sums else "its bytes; no sums at this step"
    return f"parameter {d.param} first differs at optimizer step {d.step} ({what})"
