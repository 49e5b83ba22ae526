"""Metric series of a run: read them from the record, and find where two series part."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from repro.diff.changes import same
from repro.diff.model import Divergence
from repro.diff.reader import ReadBlob, SafeReader
from repro.store.capsule import Record


def metric_rows(record: Record, read_blob: ReadBlob) -> list[dict[str, Any]]:
    """The run's metric series (rows of name/value/step): those it logged (metrics.jsonl), then
    those harvested with no code change under names it did not log (marked ``harvested``); [] when
    it has neither."""
    reader = SafeReader(read_blob)
    logged = _rows(reader.text(record.results.metrics))
    names = {str(row["name"]) for row in logged}
    harvested = [r for r in _rows(reader.text(record.results.harvested)) if str(r["name"]) not in names]
    return logged + [{**r, "harvested": True} for r in harvested]


def _rows(text: str | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "name" in row and "value" in row:
            rows.append(row)
    return rows


def _step(step: float) -> float:
    return int(step) if float(step).is_integer() else float(step)  # an epoch may be 0.5


def series(rows: list[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """Rows → {metric: [(step, value), …]}; rows without a step count from 0 in order."""
    out: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        name = str(row["name"])
        points = out.setdefault(name, [])
        step = row.get("step")
        try:
            value = float(row["value"])
        except (TypeError, ValueError):
            continue
        points.append((_step(step) if isinstance(step, int | float) else len(points), value))
    return out


def divergences(rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]]) -> list[Divergence]:
    """Each metric both runs have, where its two series first differ: earliest step first, then name."""
    sa, sb = series(rows_a), series(rows_b)
    found: list[Divergence] = []
    for name in sorted(set(sa) & set(sb)):
        pa, pb = dict(sa[name]), dict(sb[name])
        for step in sorted(set(pa) | set(pb)):
            x, y = pa.get(step), pb.get(step)
            if x is None or y is None or not same(x, y):
                found.append(Divergence(metric=name, step=step, a=x, b=y))
                break
    return sorted(found, key=lambda d: (d.step if d.step is not None else -1, d.metric))


def first_divergence(rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]]) -> Divergence | None:
    """The earliest step (then metric name) where the two series differ, or None."""
    found = divergences(rows_a, rows_b)
    return found[0] if found else None


@dataclass
class Curves:
    """Two runs' metric series side by side, with where each metric first parts: what a plot draws."""

    labels: tuple[str, str]
    a: dict[str, list[tuple[float, float]]]
    b: dict[str, list[tuple[float, float]]]
    divergences: list[Divergence] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # name -> where it came from (log_metric, stdout …)

    @property
    def names(self) -> list[str]:
        return sorted(set(self.a) | set(self.b))

    def divergence(self, name: str) -> Divergence | None:
        return next((d for d in self.divergences if d.metric == name), None)


def curves(a: Record, b: Record, read_a: ReadBlob, read_b: ReadBlob | None = None) -> Curves:
    """The curves of two runs (``read_b`` defaults to ``read_a``: one store holds both)."""
    rows_a, rows_b = metric_rows(a, read_a), metric_rows(b, read_b or read_a)
    sources = {s.name: s.source for r in (a, b) for s in r.results.series}
    return Curves((a.id, b.id), series(rows_a), series(rows_b), divergences(rows_a, rows_b), sources)


def curves_of_rows(
    rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]], labels: tuple[str, str]
) -> Curves:
    """The curves of two sets of metric rows."""
    return Curves(labels, series(rows_a), series(rows_b), divergences(rows_a, rows_b))
