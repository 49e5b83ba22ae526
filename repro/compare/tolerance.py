"""Tolerances: when a replayed value counts as equal to the original one.

A value ``b`` (replay) is within tolerance of ``a`` (original) when
``|a - b| <= atol + rtol * |a|`` (numpy's ``isclose`` with the original as reference);
NaN matches NaN and an infinity matches the same infinity. Each determinism mode has
its default tolerance (``tolerance_for``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from repro.errors import UsageError
from repro.runtime import contract
from repro.runtime.contract import Mode

MODES = contract.MODES


@dataclass(frozen=True)
class Tolerance:
    """Absolute and relative tolerance: ``|a - b| <= atol + rtol * |a|``.

    The defaults are those of ``gpu`` mode (deterministic kernels, near-exact): float32
    carries about 7 significant digits, so a relative 1e-5 admits a few ulps of
    re-association (another GPU model, cuBLAS version or reduction order) while a real
    change — another seed, batch order or learning rate — moves weights by far more.
    """

    atol: float = 1e-6
    rtol: float = 1e-5

    def close(self, a: float, b: float) -> bool:
        """Whether ``b`` is within tolerance of the reference ``a``."""
        if a == b or (math.isnan(a) and math.isnan(b)):
            return True
        if not (math.isfinite(a) and math.isfinite(b)):
            return False
        return abs(a - b) <= self.atol + self.rtol * abs(a)


STRICT = Tolerance(atol=0.0, rtol=0.0)
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "strict": STRICT,
    # Deterministic kernels: only re-association noise is expected.
    "gpu": Tolerance(atol=1e-6, rtol=1e-5),
    # Seeds only: non-deterministic kernels (atomics in scatter/index_add, cuDNN
    # autotuning) let rounding noise compound over steps, so allow 100x more.
    "off": Tolerance(atol=1e-4, rtol=1e-3),
}


def tolerance_for(mode: str) -> Tolerance:
    """The default tolerance of a determinism mode.

    Raises:
        UsageError: an unknown mode.
    """
    check_mode(mode)
    return DEFAULT_TOLERANCES[mode]


def check_mode(mode: str) -> Mode:
    """The mode, when it is strict, gpu or off.

    Raises:
        UsageError: an unknown mode.
    """
    if mode not in MODES:
        raise UsageError(f"unknown determinism mode {mode!r}; expected one of {', '.join(MODES)}")
    return mode


def largest(values: Sequence[float | None]) -> float | None:
    """The largest of some differences, NaN counting as largest; None when there are none."""
    found = [v for v in values if v is not None]
    if not found:
        return None
    return max(found, key=lambda v: math.inf if math.isnan(v) else v)
