"""Named value series (a tag's or a column's values by step) compared within a tolerance.

A `Series` maps a name (a TensorBoard tag, a JSON field, a CSV column) to its values in
order, each with the step it was logged at (None where the format has no steps). Two
series are aligned by position; a value is a number, a string, or an array (TensorBoard
tensors and histograms). Numbers compare with the mode's tolerance, everything else
exactly. The result is a `ValueReport` (pure data).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from repro.compare.tolerance import Tolerance, largest
from repro.units import shorten

Series = dict[str, list[tuple[Any, Any]]]  # name -> [(step, value), ...]


@dataclass
class ValueDiff:
    """One value that differs: which series, at which step (or position), and both values."""

    name: str
    step: Any  # the step it was logged at, or the row/position where the format has none
    original: Any
    replay: Any
    abs_diff: float | None  # None where the values are not numbers
    within_tolerance: bool


ValueFormat = Literal["tensorboard", "json", "jsonl", "csv"]  # where the value series were read


@dataclass
class ValueReport:
    """What differs between the value series of two artifacts."""

    format: ValueFormat
    compared: int = 0  # values present on both sides
    differing: int = 0
    first: ValueDiff | None = None  # the decisive difference: first out of tolerance, else first
    only_original: list[str] = field(default_factory=list)  # series (or name@step) on one side only
    only_replay: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # fields left out as timings
    max_abs: float | None = None

    @property
    def structural(self) -> bool:
        return bool(self.only_original or self.only_replay)

    @property
    def equal(self) -> bool:
        return not self.structural and self.differing == 0

    @property
    def within_tolerance(self) -> bool:
        return not self.structural and (self.first is None or self.first.within_tolerance)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _compare_value(a: Any, b: Any, tol: Tolerance) -> tuple[bool, bool, float | None]:
    """(equal, within tolerance, largest absolute difference) of two values."""
    fa, fb = _number(a), _number(b)
    if fa is not None and fb is not None:
        if fa == fb or (math.isnan(fa) and math.isnan(fb)):
            return True, True, None
        delta = abs(fa - fb) if math.isfinite(fa - fb) else math.inf
        return False, tol.close(fa, fb), delta
    if hasattr(a, "shape") and hasattr(b, "shape"):
        return _compare_arrays(a, b, tol)
    return bool(a == b), bool(a == b), None


def _compare_arrays(a: Any, b: Any, tol: Tolerance) -> tuple[bool, bool, float | None]:
    import numpy as np

    if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
        return False, False, None
    if a.dtype.kind not in "biuf":
        same = bool(np.array_equal(a, b))
        return same, same, None
    x, y = np.atleast_1d(a.astype(np.float64)), np.atleast_1d(b.astype(np.float64))  # 0-d: a scalar
    if np.array_equal(x, y, equal_nan=True):
        return True, True, None
    with np.errstate(invalid="ignore", over="ignore"):
        delta = np.abs(x - y)
        delta[np.isnan(delta) & ~(np.isnan(x) & np.isnan(y))] = np.inf
        delta[np.isnan(delta)] = 0.0
        ok = bool(np.all(delta <= tol.atol + tol.rtol * np.abs(x)))
    return False, ok, float(delta.max())


def compare_series(a: Series, b: Series, tol: Tolerance, fmt: ValueFormat) -> ValueReport:
    """Compare two sets of series by name, values aligned by position (``a`` is the reference)."""
    report = ValueReport(format=fmt)
    report.only_original = [n for n in a if n not in b]
    report.only_replay = [n for n in b if n not in a]
    first: ValueDiff | None = None
    decisive: ValueDiff | None = None
    deltas: list[float | None] = []
    for name, rows in a.items():
        other = b.get(name)
        if other is None:
            continue
        for i, (step, va) in enumerate(rows):
            if i >= len(other):
                report.only_original.append(f"{name}@{step}")
                break
            step_b, vb = other[i]
            if step != step_b:
                report.only_original.append(f"{name}@{step}")
                report.only_replay.append(f"{name}@{step_b}")
                break
            report.compared += 1
            equal, ok, delta = _compare_value(va, vb, tol)
            if equal:
                continue
            report.differing += 1
            deltas.append(delta)
            found = ValueDiff(name, step, _plain(va), _plain(vb), delta, ok)
            first = first or found
            if not ok:
                decisive = decisive or found
        if len(other) > len(rows):
            report.only_replay.append(f"{name}@{other[len(rows)][0]}")
    report.first = decisive or first
    report.max_abs = largest(deltas)
    return report


def _plain(value: Any) -> Any:
    """A value as shown in a report: arrays summarised, long text cut."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        if value.size == 1 and value.dtype.kind in "biuf":
            return value.reshape(-1)[0].item()
        return f"array{list(value.shape)} {value.dtype}"
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value)} bytes"
    if isinstance(value, str) and len(value) > 60:
        return shorten(value, 60)
    return value
