"""One definition of a run's results: two runs that differ in one kind of result alone are never called
identical, by `repro diff` (text, --json, --markdown, the HTML badge) or by a replay's verdict."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from repro.compare.reasons import Code
from repro.diff import diff_records, results
from repro.store.record import FileEntry, Record
from repro.ui import report as report_ui
from repro.ui.diff import render_json, render_markdown, render_text
from tests.builders import Blobs, make_record, same_as

# An unseeded regression script (pytorch/examples regression): no output files, and the only
# trace of its result is the last line it prints.
REGRESSION_OUT = "==> Learned function:\ty = +0.51 x^4 -1.73 x^3 +3.38 x^2 +0.22 x^1 +1.66\nLoss: {loss}\n"


def _stdout(blobs: Blobs, record: Record, loss: str) -> None:
    record.results.logs = {"stdout": blobs.put(REGRESSION_OUT.format(loss=loss))}


def _metric(blobs: Blobs, values: list[float], name: str = "loss") -> str:
    rows = [json.dumps({"name": name, "value": v, "step": i}) for i, v in enumerate(values)]
    return blobs.put("\n".join(rows) + "\n")


def _only_stdout(blobs: Blobs, a: Record, b: Record) -> None:
    _stdout(blobs, a, "0.005274")
    _stdout(blobs, b, "0.011117")


def _only_output(blobs: Blobs, a: Record, b: Record) -> None:
    b.results.outputs = [FileEntry(path="outputs/model.pt", size=1000, hash="m-other")]


def _only_logged_series(blobs: Blobs, a: Record, b: Record) -> None:
    b.results.metrics = _metric(blobs, [0.9, 0.7, 0.51])


def _only_harvested_series(blobs: Blobs, a: Record, b: Record) -> None:
    a.results.harvested = _metric(blobs, [2.0, 1.5], name="Loss/train")
    b.results.harvested = _metric(blobs, [2.0, 1.6], name="Loss/train")


def _only_exit_status(blobs: Blobs, a: Record, b: Record) -> None:
    b.results.status, b.results.exit_code = "failed", 1


KINDS: dict[str, Callable[[Blobs, Record, Record], None]] = {
    "stdout": _only_stdout,
    "output": _only_output,
    "logged series": _only_logged_series,
    "harvested series": _only_harvested_series,
    "exit status": _only_exit_status,
}


def _pair(blobs: Blobs) -> tuple[Record, Record]:
    a = make_record(blobs, "a")
    a.results.outputs = []  # as the regression script: nothing written
    _stdout(blobs, a, "0.005274")
    b = same_as(a, "b")
    b.results.logs = dict(a.results.logs)
    b.seeds.master = 2  # drawn anew: the one input that differs
    return a, b


def _said_identical(blobs: Blobs, a: Record, b: Record) -> list[str]:
    result = diff_records(a, b, blobs)
    said = []
    if "results identical" in render_text(result, show_all=True):
        said.append("text")
    if render_json(result)["results_differ"] is False:
        said.append("json")
    if "Results identical" in render_markdown(result, show_all=True):
        said.append("markdown")
    if 'id="verdict">same<' in report_ui.render_html(report_ui.from_diff(result, None)):
        said.append("html")
    verdict = results.compare_results(results.side_of(a, blobs), results.side_of(b, blobs))
    if verdict.status == "identical":
        said.append("verdict")
    return said


def test_the_control_pair_is_called_identical_everywhere() -> None:
    """Without a difference in results, every form says so: the check below can tell."""
    blobs = Blobs()
    assert _said_identical(blobs, *_pair(blobs)) == ["text", "json", "markdown", "html", "verdict"]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_runs_differing_in_one_kind_of_result_are_never_called_identical(kind: str) -> None:
    blobs = Blobs()
    a, b = _pair(blobs)
    KINDS[kind](blobs, a, b)
    assert _said_identical(blobs, a, b) == []


def test_an_unseeded_regression_names_the_printed_loss() -> None:
    blobs = Blobs()
    a, b = _pair(blobs)
    _only_stdout(blobs, a, b)
    result = diff_records(a, b, blobs)
    stdout = result.section("stdout")
    assert stdout.differs and stdout.changes[0].key == "line 2"
    assert stdout.summary == "1 line of 2 vs 2 differ; Loss 0.005274 → 0.011117 at line 2"
    assert [r.code for r in result.results] == [Code.LOG_DIFFERS]
    text = render_text(result)
    assert "results differ: 1 line of 2 vs 2 differ; Loss 0.005274 → 0.011117 at line 2" in text
    assert "seed" in text  # the drawn seed is a likely cause now, not a change without effect
    assert result.without_effect == []


def test_timings_in_stdout_are_not_a_difference() -> None:
    blobs = Blobs()
    a, b = _pair(blobs)
    a.results.logs = {"stdout": blobs.put("epoch 1 took 3.2s\nLoss: 0.1\n")}
    b.results.logs = {"stdout": blobs.put("epoch 1 took 4.9s\nLoss: 0.1\n")}
    assert not diff_records(a, b, blobs).results_differ


def test_two_runs_that_failed_alike_compare_on_the_rest() -> None:
    blobs = Blobs()
    a, b = _pair(blobs)
    for r in (a, b):
        r.results.status, r.results.exit_code = "failed", 1
    assert not diff_records(a, b, blobs).results_differ


def test_an_output_that_differs_is_named_among_the_results_once() -> None:
    blobs = Blobs()
    a, b = _pair(blobs)
    a.results.outputs = [FileEntry(path="outputs/model.pt", size=1000, hash="m1")]
    b.results.outputs = [FileEntry(path="outputs/model.pt", size=1000, hash="m2")]
    result = diff_records(a, b, blobs)
    assert [(r.code, r.path) for r in result.results] == [(Code.OUTPUT_DIFFERS, "outputs/model.pt")]
    assert result.results[0].message.startswith("output outputs/model.pt changed")
