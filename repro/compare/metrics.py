"""Compare two runs' metric series (rows of ``metrics.jsonl``) → the decisive divergence.

Series are keyed by name (and rank when not 0) and aligned by position within the
series; values compare with the tolerance (`repro.compare.tolerance`). A series harvested with no
code change (rows marked ``harvested``) that only one side has is left out: whether it was
harvested depends on the machine (the ``tensorboard`` package) and its settings, not on the run.
Pure data in and out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from repro.compare.tolerance import Tolerance, largest


@dataclass
class MetricDivergence:
    """Where two metric series part: the decisive divergence, or the first difference."""

    name: str
    step: int | None
    index: int  # position within that metric's series, from 0
    original: Any  # value on the original side (None where the series had ended)
    replay: Any
    kind: str  # value | step | length | missing
    abs_diff: float | None
    within_tolerance: bool
    original_count: int  # rows in the original's metrics
    replay_count: int
    differing: int  # aligned values that differ at all
    max_abs: float | None  # largest difference over all aligned numeric values


def _metric_key(row: dict[str, Any]) -> str:
    name = str(row.get("name", "?"))
    rank = row.get("rank")
    return f"{name} (rank {rank})" if rank not in (None, 0) else name


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def compare_metrics(
    original: list[dict[str, Any]], replay: list[dict[str, Any]], tol: Tolerance
) -> MetricDivergence | None:
    """Walk two metric logs in the original's order; None when the series are equal.

    Series are keyed by name (and rank when not 0) and aligned by position within the
    series. The decisive divergence is reported: the first one out of tolerance or
    structural (another step, a series longer or missing on one side); when every
    difference is within tolerance, the first difference.
    """
    series_b: dict[str, list[dict[str, Any]]] = {}
    for row in replay:
        series_b.setdefault(_metric_key(row), []).append(row)
    seen: dict[str, int] = {}
    first: MetricDivergence | None = None
    decisive: MetricDivergence | None = None
    differing = 0
    deltas: list[float | None] = []

    def div(kind: str, name: str, step: Any, i: int, va: Any, vb: Any, delta: float | None = None,
            ok: bool = False) -> MetricDivergence:  # fmt: skip
        return MetricDivergence(name, step, i, va, vb, kind, delta, ok, len(original), len(replay), 0, None)

    for row in original:
        key = _metric_key(row)
        i = seen[key] = seen.get(key, -1) + 1
        other = series_b.get(key)
        step, va = row.get("step"), row.get("value")
        if other is None and row.get("harvested"):
            continue  # harvested on one side only: what this machine can read (tensorboard), not the run
        if other is None or i >= len(other):
            differing += 1
            decisive = decisive or div("missing" if other is None else "length", key, step, i, va, None)
            continue
        brow = other[i]
        if brow.get("step") != step:
            differing += 1
            decisive = decisive or div("step", key, step, i, step, brow.get("step"))
            continue
        vb = brow.get("value")
        fa, fb = _as_float(va), _as_float(vb)
        if fa is not None and fb is not None:
            if fa == fb or (math.isnan(fa) and math.isnan(fb)):
                continue
            delta: float | None = abs(fa - fb) if math.isfinite(fa - fb) else math.inf
            deltas.append(delta)
            ok = tol.close(fa, fb)
        elif va == vb:
            continue
        else:
            delta, ok = None, False
        differing += 1
        found = div("value", key, step, i, va, vb, delta, ok)
        first = first or found
        if not ok:
            decisive = decisive or found
    for key, rows in series_b.items():
        n = seen.get(key, -1) + 1
        if n == 0 and rows[0].get("harvested"):
            continue
        if n < len(rows):
            differing += len(rows) - n
            kind = "length" if key in seen else "missing"
            decisive = decisive or div(kind, key, rows[n].get("step"), n, None, rows[n].get("value"))
    result = decisive or first
    if result is not None:
        result.differing = differing
        result.max_abs = largest(deltas)
    return result
