"""Metric series of a run: read them from the record, and where two runs' series part."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from repro.compare import metrics
from repro.compare.metrics import metric_key
from repro.compare.tolerance import STRICT, Tolerance
from repro.diff.model import Divergence
from repro.diff.reader import ReadBlob, SafeReader
from repro.runtime import contract
from repro.store import limits
from repro.store.record import Record, SeriesSource


def metric_rows(record: Record, read_blob: ReadBlob, cut: list[str] | None = None) -> list[dict[str, Any]]:
    """The run's metric series (rows of name/value/step): those it logged (metrics.jsonl), then
    those harvested with no code change under names it did not log (marked ``harvested``); [] when
    it has neither. Each is read no further than `limits.MAX_METRICS_BYTES`; where one is cut
    there, the one line saying so is added to ``cut``."""
    reader = SafeReader(read_blob)

    def rows(blob: str | None, what: str) -> list[dict[str, Any]]:
        text, was_cut = limits.stream_head(reader(blob), limits.MAX_METRICS_BYTES)
        if was_cut and cut is not None:
            cut.append(limits.cut_note(what, limits.MAX_METRICS_BYTES))
        return contract.metric_rows(text)

    logged = rows(record.results.metrics, "the metrics log")
    names = {str(row["name"]) for row in logged}
    harvested = rows(record.results.harvested, "the harvested metrics")
    return logged + [{**r, "harvested": True} for r in harvested if str(r["name"]) not in names]


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


def _shared(
    rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of the series both runs have: a series one run alone has is a change, not a divergence."""
    shared = {metric_key(r) for r in rows_a} & {metric_key(r) for r in rows_b}
    return [r for r in rows_a if metric_key(r) in shared], [r for r in rows_b if metric_key(r) in shared]


def first_divergence(
    rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]], tol: Tolerance = STRICT
) -> Divergence | None:
    """Where the series both runs logged first part (`repro.compare.metrics.first_divergence`, exact
    unless ``tol`` says otherwise), or None."""
    found = metrics.first_divergence(*_shared(rows_a, rows_b), tol)
    return _divergence(found) if found is not None else None


def divergences(
    rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]], tol: Tolerance = STRICT
) -> list[Divergence]:
    """Each series both runs have, where it first parts (the same rule), earliest step first, then name."""
    firsts: dict[str, Divergence] = {}
    for found in metrics.divergences(*_shared(rows_a, rows_b), tol):
        if not found.within_tolerance and found.name not in firsts:
            firsts[found.name] = _divergence(found)
    return sorted(firsts.values(), key=lambda d: (d.step if d.step is not None else -1, d.metric))


def _divergence(found: metrics.MetricDivergence) -> Divergence:
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


@dataclass
class Curves:
    """Two runs' metric series side by side, with where each metric first parts: what a plot draws."""

    labels: tuple[str, str]
    a: dict[str, list[tuple[float, float]]]
    b: dict[str, list[tuple[float, float]]]
    divergences: list[Divergence] = field(default_factory=list)
    sources: dict[str, SeriesSource] = field(default_factory=dict)  # name -> where it came from

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
