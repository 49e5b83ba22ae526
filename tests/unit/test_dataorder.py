"""The data-order compare: the first step, rank and DataLoader whose samples differ, and worker seeds."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from repro.compare import dataorder
from repro.compare import reasons as codes
from repro.compare.reasons import Code
from repro.compare.verdict import Side, compare_runs
from repro.ui.verdict import render_markdown, render_text


def _rows(
    batches: list[list[int]], loader: int = 0, seed: int = 7, epoch_every: int = 0
) -> list[dict[str, Any]]:
    """Rows as the runtime writes them: a running digest over the batches' indices."""
    rows: list[dict[str, Any]] = [{"loader": loader, "epoch": 0, "base_seed": seed, "workers": 2}]
    digest = ""
    for step, indices in enumerate(batches):
        text = json.dumps(indices, separators=(",", ":"))
        digest = hashlib.blake2b((digest + text).encode(), digest_size=8).hexdigest()
        row = {
            "loader": loader,
            "epoch": 0,
            "step": step,
            "digest": digest,
            "n": len(indices),
            "indices": indices,
        }
        rows.append(row)
    return rows


BATCHES = [[3, 1], [0, 2], [5, 4]]


def test_equal_orders_and_seeds_give_no_difference() -> None:
    report = dataorder.compare({-1: _rows(BATCHES)}, {-1: _rows(BATCHES)})
    assert report is not None and not report.differs


def test_the_first_differing_step_is_named_and_later_ones_follow_from_the_running_digest() -> None:
    other = [[3, 1], [2, 0], [5, 4]]
    report = dataorder.compare({-1: _rows(BATCHES)}, {-1: _rows(other)})
    assert report is not None and report.order is not None
    d = report.order
    assert (d.step, d.rank, d.loader, d.epoch, d.kind) == (1, -1, 0, 0, "indices")
    assert (d.original, d.replay) == ([0, 2], [2, 0])
    assert dataorder.describe_order(d) == (
        "data order differs at DataLoader #1, step 1 (epoch 0): the DataLoader yielded other samples "
        "([0, 2] vs [2, 0])"
    )


def test_the_earliest_step_wins_across_ranks_then_the_lowest_rank_and_loader() -> None:
    a = {0: _rows(BATCHES) + _rows(BATCHES, loader=1), 1: _rows(BATCHES)}
    b = {0: _rows(BATCHES) + _rows([[3, 1], [0, 2], [4, 5]], loader=1), 1: _rows([[3, 1], [2, 0], [5, 4]])}
    report = dataorder.compare(a, b)
    assert report is not None and report.order is not None
    assert (report.order.step, report.order.rank, report.order.loader) == (1, 1, 0)


def test_a_run_that_drew_more_batches_differs_by_length() -> None:
    report = dataorder.compare({-1: _rows(BATCHES)}, {-1: _rows(BATCHES[:2])})
    assert report is not None and report.order is not None
    assert (report.order.step, report.order.kind, report.order.replay) == (2, "length", None)
    assert "only the original drew a batch at DataLoader #1, step 2" in dataorder.describe_order(report.order)


def test_worker_seeds_compare_per_loader_and_epoch() -> None:
    report = dataorder.compare({3: _rows(BATCHES, seed=1)}, {3: _rows(BATCHES, seed=2)})
    assert report is not None and report.order is None and report.worker_seeds is not None
    s = report.worker_seeds
    assert (s.epoch, s.rank, s.loader, s.original, s.replay) == (0, 3, 0, 1, 2)
    assert (
        dataorder.describe_seeds(s)
        == "DataLoader worker seeds differ at rank 3, DataLoader #1, epoch 0: base seed 1 vs 2"
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [({}, {-1: _rows(BATCHES)}), ({0: _rows(BATCHES)}, {0: _rows(BATCHES), 1: _rows(BATCHES)})],
)
def test_no_record_on_one_side_or_other_ranks_are_not_compared(a: dataorder.Rows, b: dataorder.Rows) -> None:
    assert dataorder.compare(a, b) is None


def test_log_names_and_runtime_files() -> None:
    assert dataorder.kept_logs(
        ["dataorder.jsonl", "dataorder.rank1.jsonl", "dataorder.rankx.jsonl", "x.jsonl"]
    ) == {
        "dataorder": "dataorder.jsonl",
        "dataorder.rank1": "dataorder.rank1.jsonl",
    }
    assert [dataorder.rank_of(n) for n in ("dataorder", "dataorder.rank2", "trace")] == [-1, 2, None]
    text = "\n".join(json.dumps(r) for r in _rows(BATCHES)) + '\n{"loader": 0, "st'
    rows = dataorder.read({"dataorder": "blob", "stdout": "other"}, lambda blob: text.encode())
    assert list(rows) == [-1] and len(rows[-1]) == 4  # the half-written line is skipped


def _side(rows: dataorder.Rows) -> Side:
    return Side(label="r", outputs=[], open_output=lambda e: None, metrics=[], stdout="", data_order=rows)


def test_a_verdict_names_the_data_order_first_and_diverges_even_within_tolerance() -> None:
    a, b = _side({-1: _rows(BATCHES, seed=1)}), _side({-1: _rows([[1, 3], [0, 2], [5, 4]], seed=2)})
    for mode in ("strict", "gpu"):
        v = compare_runs(a, b, mode)
        assert v.status == "diverged"
        assert [r.code for r in v.reasons] == [Code.DATA_ORDER_DIFFERS, Code.WORKER_SEEDS_DIFFER]
        assert v.reasons[0].fields["step"] == 0
        assert v.summary.startswith("diverged: data order differs at DataLoader #1, step 0")
    text = render_text(v, colour=False)
    assert "  ✗ DataLoader worker seeds differ at DataLoader #1, epoch 0: base seed 1 vs 2" in text
    assert "| data order | differs | data order differs at DataLoader #1, step 0" in render_markdown(v)
    same = compare_runs(a, _side({-1: _rows(BATCHES, seed=1)}), "strict")
    assert same.status == "identical" and same.data_order is None and same.reasons == []
    assert codes.CODES.index(Code.DATA_ORDER_DIFFERS) < codes.CODES.index(Code.TRACE_DIFFERS)
