"""Metric series of a run: read them from the record, and where two runs' series part."""

from __future__ import annotations

from typing import Any

from repro.compare import metrics
from repro.compare.metrics import metric_key
from repro.compare.tolerance import STRICT, Tolerance
from repro.diff.model import Divergence
from repro.diff.reader import ReadBlob, SafeReader
from repro.runtime import contract
from repro.store.capsule import Record


def metric_rows(record: Record, read_blob: ReadBlob) -> list[dict[str, Any]]:
    """The run's metrics series (rows of name/value/step) from its metrics.jsonl blob; [] when absent."""
    return contract.metric_rows(SafeReader(read_blob).text(record.results.metrics) or "")


def series(rows: list[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """Rows → {metric: [(step, value), …]}; rows without a step count from 0 in order."""
    out: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        name = str(row["name"])
        points = out.setdefault(name, [])
        step = row.get("step")
        try:
            value = float(row["value"])
        except (TypeError, ValueError):
            continue
        points.append((int(step) if isinstance(step, int | float) else len(points), value))
    return out


def first_divergence(
    rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]], tol: Tolerance = STRICT
) -> Divergence | None:
    """Where the series both runs logged first part (`repro.compare.metrics.first_divergence`, exact
    unless ``tol`` says otherwise), or None; a series one run alone logged is a change, not a divergence."""
    shared = {metric_key(r) for r in rows_a} & {metric_key(r) for r in rows_b}
    found = metrics.first_divergence(
        [r for r in rows_a if metric_key(r) in shared], [r for r in rows_b if metric_key(r) in shared], tol
    )
    if found is None:
        return None
    values = found.kind != "step"  # rows out of line: their steps differ, not their values
    return Divergence(
        metric=found.name,
        step=found.step,
        a=_number(found.original) if values else None,
        b=_number(found.replay) if values else None,
    )


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
