from __future__ import annotations

from repro.compare.tolerance import STRICT, Tolerance
from repro.compare.trace import compare_trace, describe, parse
from repro.compare.verdict import Side, compare_runs
from repro.store.record import FileEntry


def _trace(*steps: dict[str, list[float]]) -> list[dict[str, object]]:
    return [{"step": i, "params": p} for i, p in enumerate(steps)]


A = _trace({"w": [1.0, 2.0], "b": [0.5, 0.5]}, {"w": [1.5, 2.5], "b": [0.25, 0.25]})


def test_identical_traces_have_no_divergence() -> None:
    assert compare_trace(A, A, STRICT) is None


def test_the_first_step_and_parameter_that_differ() -> None:
    b = _trace({"w": [1.0, 2.0], "b": [0.5, 0.5]}, {"w": [1.5, 2.5], "b": [0.2500001, 0.25]})
    d = compare_trace(A, b, STRICT)
    assert d is not None and (d.step, d.param, d.kind, d.within_tolerance) == (1, "b", "value", False)
    assert "parameter b first differs at optimizer step 1" in describe(d)


def test_tolerance_decides_and_the_first_beyond_it_is_reported() -> None:
    b = _trace({"w": [1.0000001, 2.0], "b": [0.5, 0.5]}, {"w": [1.5, 2.5], "b": [0.3, 0.25]})
    d = compare_trace(A, b, Tolerance(atol=1e-6, rtol=1e-5))
    assert d is not None and (d.step, d.param, d.within_tolerance) == (1, "b", False)
    near = _trace({"w": [1.0000001, 2.0], "b": [0.5, 0.5]}, A[1]["params"])  # type: ignore[arg-type]
    d = compare_trace(A, near, Tolerance(atol=1e-6, rtol=1e-5))
    assert d is not None and d.within_tolerance and d.param == "w"


def test_length_and_missing_parameters() -> None:
    d = compare_trace(A, A[:1], STRICT)
    assert d is not None and d.kind == "length" and "2 vs 1" in describe(d)
    d = compare_trace(A, _trace({"w": [1.0, 2.0]}), STRICT)
    assert d is not None and d.kind == "missing" and d.param == "b"


def test_parse_skips_bad_lines() -> None:
    assert parse('{"step": 0, "params": {"w": [1, 2]}}\nnot json\n{"x": 1}\n') == [
        {"step": 0, "params": {"w": [1, 2]}}
    ]


def test_a_trace_divergence_leads_the_verdict_reasons() -> None:
    out = FileEntry("outputs/model.pt", 10, "aa", False)
    changed = FileEntry("outputs/model.pt", 10, "bb", False)
    b = _trace(A[0]["params"], {"w": [1.5, 2.5], "b": [9.0, 9.0]})  # type: ignore[arg-type]
    v = compare_runs(
        Side("a", [out], lambda e: None, [], "", trace=A),
        Side("b", [changed], lambda e: None, [], "", trace=b),
        "strict",
    )
    assert v.status == "diverged" and v.trace is not None
    assert v.reasons[0].code == "trace_differs" and v.reasons[0].fields["param"] == "b"
    assert v.reasons[0].message.startswith("parameter b first differs at optimizer step 1")
    same = compare_runs(
        Side("a", [out], lambda e: None, [], "", trace=A),
        Side("b", [out], lambda e: None, [], "", trace=A),
        "strict",
    )
    assert same.status == "identical" and same.trace is None


def test_a_trace_of_an_older_summation_order_agrees_up_to_its_rounding_only() -> None:
    import torch

    from repro.runtime import steptrace

    torch.manual_seed(0)
    weights = [torch.randn(300_000), torch.randn(1000)]
    sums = {f"p{i}": [float(w.double().sum()), float(w.double().abs().sum())] for i, w in enumerate(weights)}
    old: list[dict[str, object]] = [{"step": 0, "f": 2, "params": sums}]
    values = steptrace.fingerprints(torch, weights)
    new = [{"step": 0, "f": steptrace.SUMMATION, "params": {f"p{i}": v for i, v in enumerate(values)}}]
    assert compare_trace(old, new, STRICT) is None and compare_trace(new, old, STRICT) is None
    moved = weights[0].clone()
    moved[5] += 1.0  # a real difference (float32 rounding of a sum of 300k values is ~0.01)
    values = steptrace.fingerprints(torch, [moved, weights[1]])
    new = [{"step": 0, "f": steptrace.SUMMATION, "params": {f"p{i}": v for i, v in enumerate(values)}}]
    d = compare_trace(old, new, STRICT)
    assert d is not None and d.param == "p0"
    nudged = {**sums, "p0": [sums["p0"][0] + 1e-9, sums["p0"][1]]}
    alike: list[dict[str, object]] = [{"step": 0, "f": 2, "params": nudged}]
    assert compare_trace(old, alike, STRICT) is not None  # summed alike: to the bit


def _bits_trace(entry: list[object]) -> list[dict[str, object]]:
    first = {"step": 0, "f": 3, "params": {"w": [1.0, 7], "b": [0.5, 9]}}
    return [first, {"step": 1, "f": 3, "params": {"w": entry}}]


def test_the_bits_decide_whether_weights_are_the_same_the_sums_how_close() -> None:
    a = _bits_trace([2.0, 1 << 63])
    assert compare_trace(a, _bits_trace([2.0, 1 << 63]), STRICT) is None
    assert compare_trace(a, _bits_trace([2.0000001, 1 << 63]), STRICT) is None  # a sum taken otherwise
    d = compare_trace(a, _bits_trace([2.0, (1 << 63) + 1]), STRICT)  # one ulp the sum lost
    assert d is not None and (d.step, d.param, d.within_tolerance) == (1, "w", False)
    gpu = Tolerance(atol=1e-6, rtol=1e-5)
    d = compare_trace(a, _bits_trace([2.000001, 5]), gpu)
    assert d is not None and d.within_tolerance
    d = compare_trace(a, _bits_trace([2.5, 5]), gpu)
    assert d is not None and not d.within_tolerance


def _sparse(*entries: tuple[float | None, int]) -> list[dict[str, object]]:
    """A trace whose sums are taken at some steps only ("f": 4): one parameter, w."""
    return [{"step": i, "f": 4, "params": {"w": list(e)}} for i, e in enumerate(entries)]


def test_digests_decide_at_steps_without_sums_and_tolerances_at_the_next_step_with_them() -> None:
    a = _sparse((1.0, 10), (None, 11), (None, 12), (4.0, 13))
    d = compare_trace(a, _sparse((1.0, 10), (None, 99), (None, 12), (4.0, 13)), STRICT)
    assert d is not None and (d.step, d.within_tolerance) == (1, False)
    assert describe(d) == "parameter w first differs at optimizer step 1 (its bytes; no sums at this step)"
    gpu = Tolerance(atol=1e-6, rtol=1e-5)
    near = _sparse((1.0, 10), (None, 98), (None, 97), (4.0000001, 96))
    d = compare_trace(a, near, gpu)
    assert d is not None and (d.step, d.within_tolerance) == (1, True)  # judged by step 3's sums
    far = _sparse((1.0, 10), (None, 98), (None, 97), (4.5, 96))
    d = compare_trace(a, far, gpu)
    assert d is not None and (d.step, d.within_tolerance) == (3, False) and "sum 4.0 → 4.5" in describe(d)


def test_an_older_trace_is_compared_with_sparse_sums_at_the_steps_that_have_them() -> None:
    old: list[dict[str, object]] = [
        {"step": i, "f": 2, "params": {"w": [s, 100.0]}} for i, s in enumerate([1.0, 2.0, 3.0])
    ]
    assert compare_trace(old, _sparse((1.0, 5), (None, 6), (3.0, 7)), STRICT) is None
    d = compare_trace(old, _sparse((1.0, 5), (None, 6), (3.5, 7)), STRICT)
    assert d is not None and d.step == 2
    every_step: list[dict[str, object]] = [
        {"step": i, "f": 3, "params": {"w": [float(i), b]}} for i, b in enumerate([5, 6, 7])
    ]
    assert compare_trace(every_step, _sparse((0.0, 5), (None, 6), (2.0, 7)), STRICT) is None
    d = compare_trace(every_step, _sparse((0.0, 5), (None, 8), (2.0, 7)), STRICT)
    assert d is not None and d.step == 1
