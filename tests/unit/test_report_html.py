"""The HTML report: one self-contained page with the verdict, the causes, inline SVG curves, the outputs."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from repro.compare.outputs import OutputDiff
from repro.compare.reasons import Code, Reason
from repro.compare.verdict import Verdict
from repro.diff.metrics import curves_of_rows
from repro.ui import report


class _Page(HTMLParser):
    """Every tag and every attribute that could load something."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.links += [v or "" for k, v in attrs if k in ("src", "href") or (k == "xmlns" and tag != "svg")]


def _rows(values: list[float], name: str = "loss") -> list[dict[str, object]]:
    return [{"name": name, "value": v, "step": i * 10} for i, v in enumerate(values)]


def _verdict() -> Verdict:
    return Verdict(
        status="diverged",
        mode="strict",
        original="run-a",
        replay="run-b",
        outputs=[OutputDiff(path="ckpt.pt", status="changed", original_size=10, replay_size=10)],
        summary="diverged: metric loss diverges at step 20: 2.1 -> 2.2",
        reasons=[Reason(Code.METRIC_DIFFERS, "metric loss diverges at step 20: 2.1 -> 2.2")],
    )


def test_the_page_is_self_contained_and_draws_both_curves_with_the_divergence() -> None:
    curves = curves_of_rows(_rows([3.0, 2.5, 2.1, 1.9]), _rows([3.0, 2.5, 2.2, 2.0]), ("run-a", "run-b"))
    page = report.render_html(report.from_verdict("repro check", _verdict(), curves))
    parser = _Page()
    parser.feed(page)
    assert "script" not in parser.tags and "link" not in parser.tags and "img" not in parser.tags
    assert parser.links == []  # nothing fetched: no src, no href
    assert page.count("<svg") == 1 and 'class="run-a"' in page and 'class="run-b"' in page
    assert 'class="divergence"' in page and "first divergence: step 20" in page
    assert re.search(r'id="verdict">diverged<', page)
    assert "metric loss diverges at step 20: 2.1 -&gt; 2.2" in page  # causes, escaped
    assert "<code>ckpt.pt</code>" in page


def test_names_from_a_capsule_are_escaped() -> None:
    rows = _rows([1.0, 2.0], name="<img src=x onerror=alert(1)>")
    page = report.render_html(report.from_verdict("t", _verdict(), curves_of_rows(rows, rows, ("a", "b"))))
    assert "<img" not in page and "&lt;img src=x" in page


def test_a_run_without_series_gives_a_page_without_curves() -> None:
    page = report.render_html(report.from_verdict("t", _verdict(), curves_of_rows([], [], ("a", "b"))))
    assert "<svg" not in page and "no curves: neither run has a metric series" in page


def test_the_first_difference_names_the_tensor_and_the_nondeterministic_ops() -> None:
    verdict = _verdict()
    verdict.reasons.insert(
        0, Reason(Code.TENSOR_DIFFERS, "m", path="model.pt", fields={"tensor": "fc.weight"})
    )
    page = report.render_html(report.from_verdict("t", verdict, None, ops="index_add_ ×3 at train.py:12"))
    assert "fc.weight in model.pt" in page and "index_add_ ×3 at train.py:12" in page
    verdict.status = "identical"
    page = report.render_html(report.from_verdict("t", verdict, None, ops="index_add_ ×3 at train.py:12"))
    assert "index_add_" not in page  # the result came back: the ops did not matter


def test_an_interrupt_check_shows_each_resumes_state_per_rank_escaped() -> None:
    page = report.from_verdict("repro check", _verdict(), None)
    page.states = [("run-c", "—", "rank 0: same state at 4 optimizer step(s) from the resume point"),
                   ("run-d", "sampler", "rank 1: sampler.epoch 2 vs 0 at optimizer step 9 <b>")]  # fmt: skip
    html = report.render_html(page)
    table = html.split('<table id="states">', 1)[1].split("</table>", 1)[0]
    assert "Resume state, per rank" in html and table.count("<tr>") == 3
    assert "rank 1: sampler.epoch 2 vs 0 at optimizer step 9 &lt;b&gt;" in table
    assert "<code>run-d</code>" in table
    plain = report.render_html(report.from_verdict("repro check", _verdict(), None))
    assert '<table id="states">' not in plain
