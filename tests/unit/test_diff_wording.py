"""What a diff and a verdict say in words: a given seed is never called drawn, files earlier runs
left rank below another data order, counts are spelt with one plural rule, and a page with no
curves says so."""

from __future__ import annotations

from repro.compare import dataorder
from repro.compare.verdict import Verdict
from repro.compare.verdict import _summary as verdict_summary
from repro.diff import diff_records, rank_causes
from repro.store.record import FileEntry
from repro.ui import report as report_ui
from repro.units import plural
from tests.builders import Blobs, make_record, other_results, same_as


def test_an_explicit_seed_is_not_labelled_drawn() -> None:
    blobs = Blobs()
    a = make_record(blobs, "a")
    a.seeds.master, a.seeds.drawn = 1234567, True  # `repro run -- python train.py`
    b = other_results(same_as(a, "b"))
    b.seeds.master, b.seeds.drawn = 5, False  # `repro run --seed 5 -- python train.py`
    result = diff_records(a, b, blobs)
    assert result.section("seeds").summary == "seed 1234567 (drawn) → 5 (given)"
    b.seeds.drawn = True
    assert diff_records(a, b, blobs).section("seeds").summary == "seed 1234567 → 5 (both drawn)"
    a.seeds.drawn = b.seeds.drawn = False
    assert diff_records(a, b, blobs).section("seeds").summary == "seed 1234567 → 5"


def test_files_earlier_runs_left_rank_below_a_data_order_difference() -> None:
    blobs = Blobs()
    a = make_record(blobs, "a")
    a.code.kind = "snapshot"
    a.code.untracked = [FileEntry(path="model.pt", size=100, hash="old")]
    b = other_results(same_as(a, "b"))
    b.code.untracked = [FileEntry(path="model.pt", size=100, hash="new")]
    b.code.earlier_outputs = {"model.pt": "run-a"}
    sections = {s.name: s for s in diff_records(a, b, blobs).sections}
    order = dataorder.DataOrderReport(
        order=dataorder.OrderDivergence(0, -1, 0, 0, "indices", [3, 17], [8, 2])
    )
    causes = rank_causes(sections, a, b, True, order)
    assert [c.category for c in causes[:2]] == ["data_order", "input"]
    assert causes[1].reason.startswith("files earlier runs left in the working tree differ")


def test_counts_use_the_one_plural_rule() -> None:
    assert plural(1, "file") == "1 file" and plural(0, "output") == "0 outputs"
    no_outputs = Verdict(status="identical", mode="strict")
    assert verdict_summary(no_outputs) == "identical: no outputs, metrics and stdout equal"
    one = Verdict(status="identical", mode="strict", outputs=[_same("model.pt")])
    assert verdict_summary(one).startswith("identical: 1 output identical")


def _same(path: str):  # type: ignore[no-untyped-def]
    from repro.compare.outputs import OutputDiff

    return OutputDiff(path=path, status="same", original_hash="h", replay_hash="h")


def test_a_page_with_no_curves_says_so() -> None:
    blobs = Blobs()
    a = make_record(blobs, "a")
    result = diff_records(a, same_as(a, "b"), blobs)
    from repro.diff.metrics import Curves

    page = report_ui.render_html(report_ui.from_diff(result, Curves(labels=("a", "b"), a={}, b={})))
    assert "no curves: neither run has a metric series" in page
