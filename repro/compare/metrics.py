"""Where two runs' metric series (rows of ``metrics.jsonl``) part: the one rule, for replay and diff.

Series are keyed by name (and rank when not 0) and aligned by position within the
series; values compare with a tolerance (`repro.compare.tolerance`; ``STRICT`` for exact);
they are walked in the original's order (the order they were logged), then the rows only the
other side has. A series harvested with no code change (rows marked ``harvested``) that only one
side has is left out: whether it was harvested depends on the machine (the ``tensorboard`` package)
and its settings, not on the run. Pure data in and out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from repro.compare.tolerance import STRICT, Tolerance, largest

MetricDiffKind = Literal["value", "step", "length", "missing"]


@dataclass
class MetricDivergence:
    """Where two metric series part: the decisive divergence, or the first difference."""

    name: str
    step: int | None
    index: int  # position within that metric's series, from 0
    original: Any  # value on the original side (None where the series had ended)
    replay: Any
    kind: MetricDiffKind
    abs_diff: float | None
    within_tolerance: bool
    original_count: int  # rows in the original's metrics
    replay_count: int
    differing: int  # aligned values that differ at all
    max_abs: float | None  # largest difference over all aligned numeric values


def metric_key(row: dict[str, Any]) -> str:
    """The series a row belongs to: its name, and its rank when not 0."""
    name = str(row.get("name", "?"))
    rank = row.get("rank")
    return f"{name} (rank {rank})" if rank not in (None, 0) else name


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def divergences(
    original: list[dict[str, Any]], replay: list[dict[str, Any]], tol: Tolerance = STRICT
) -> list[MetricDivergence]:
    """Every place two metric logs part, in the original's order, then the series the replay has
    longer or alone; each value difference says whether it is within ``tol``."""
    # A log read leniently may hold a JSON value that is no row (a line cut after its first digits).
    original = [r for r in original if isinstance(r, dict)]
    replay = [r for r in replay if isinstance(r, dict)]
    series_b: dict[str, list[dict[str, Any]]] = {}
    for row in replay:
        series_b.setdefault(metric_key(row), []).append(row)
    seen: dict[str, int] = {}
    found: list[MetricDivergence] = []

    def div(kind: MetricDiffKind, name: str, step: Any, i: int, va: Any, vb: Any, delta: float | None = None,
            ok: bool = False) -> None:  # fmt: skip
        found.append(
            MetricDivergence(name, step, i, va, vb, kind, delta, ok, len(original), len(replay), 0, None)
        )

    for row in original:
        key = metric_key(row)
        i = seen[key] = seen.get(key, -1) + 1
        other = series_b.get(key)
        step, va = row.get("step"), row.get("value")
        if other is None and row.get("harvested"):
            continue  # harvested on one side only: what this machine can read (tensorboard), not the run
        if other is None or i >= len(other):
            div("missing" if other is None else "length", key, step, i, va, None)
            continue
        brow = other[i]
        if brow.get("step") != step:
            div("step", key, step, i, step, brow.get("step"))
            continue
        vb = brow.get("value")
        fa, fb = _as_float(va), _as_float(vb)
        if fa is not None and fb is not None:
            if fa == fb or (math.isnan(fa) and math.isnan(fb)):
                continue
            delta = abs(fa - fb) if math.isfinite(fa - fb) else math.inf
            div("value", key, step, i, va, vb, delta, tol.close(fa, fb))
        elif va != vb:
            div("value", key, step, i, va, vb)
    for key, rows in series_b.items():
        n = seen.get(key, -1) + 1
        if n == 0 and rows[0].get("harvested"):
            continue
        for i in range(n, len(rows)):
            div(
                "length" if key in seen else "missing",
                key,
                rows[i].get("step"),
                i,
                None,
                rows[i].get("value"),
            )
    return found


def first_divergence(
    original: list[dict[str, Any]], replay: list[dict[str, Any]], tol: Tolerance = STRICT
) -> MetricDivergence | None:
    """Where two metric logs first part beyond ``tol`` (a value out of tolerance, another step, a
    series longer or missing on one side); None when they agree within it."""
    return next((d for d in divergences(original, replay, tol) if not d.within_tolerance), None)


def compare_metrics(
    original: list[dict[str, Any]], replay: list[dict[str, Any]], tol: Tolerance
) -> MetricDivergence | None:
    """Walk two metric logs in the original's order; None when the series are equal.

    The decisive divergence is reported (`first_divergence`); when every difference is within
    tolerance, the first difference. It carries how many values differ and the largest gap.
    """
    found = divergences(original, replay, tol)
    result = next((d for d in found if not d.within_tolerance), found[0] if found else None)
    if result is not None:
        result.differing = len(found)
        result.max_abs = largest([d.abs_diff for d in found if d.kind == "value" and d.abs_diff is not None])
    return result
