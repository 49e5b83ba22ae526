"""Values logged as 0-d tensors (a TensorBoard scalar written as a tensor) compare like arrays."""

from __future__ import annotations

import numpy as np

from repro.compare.tolerance import Tolerance
from repro.compare.values import _compare_arrays


def test_zero_dimensional_arrays_compare_with_their_difference() -> None:
    equal, ok, delta = _compare_arrays(np.array(0.5), np.array(0.75), Tolerance())
    assert (equal, ok, delta) == (False, False, 0.25)
    assert _compare_arrays(np.array(1.0), np.array(1.0), Tolerance())[0] is True
