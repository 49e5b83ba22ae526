"""Streams written before the one row key (tests/data/streams-before: a real capsule and the runtime
directories of a real `repro check --interrupt` run) are still read by the host's readers, row for row."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from repro.collect import checkpoints, reports
from repro.compare import dataorder, ops, resumetrace, trace
from repro.compare.tolerance import Tolerance
from repro.integrations import trackers
from repro.runtime import contract
from repro.store.capsule import blob_member
from repro.store.recordio import load_record

DATA = Path(__file__).parents[1] / "data" / "streams-before"
CAPSULE = DATA / "capsule"  # the capsule's members as its tar held them
RUN, RESUMED = DATA / "runtime-run", DATA / "runtime-resumed"


@pytest.fixture(scope="module")
def capsule() -> dict[str, str]:
    record = load_record((CAPSULE / "capsule.yaml").read_bytes())
    assert isinstance(record.results.metrics, str)
    return {**record.results.logs, "metrics": record.results.metrics}


def _blob(logs: dict[str, str], log: str) -> str:
    return (CAPSULE / blob_member(logs[log])).read_text()


def test_the_members_are_the_ones_its_sums_name() -> None:
    for line in (CAPSULE / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        assert hashlib.sha256((CAPSULE / name).read_bytes()).hexdigest() == digest, name


def test_the_capsule_streams_are_read(capsule: dict[str, str]) -> None:
    assert {"trace", "ops", "dataorder", "metrics"} <= set(capsule)
    assert len(trace.parse(_blob(capsule, "trace"))) == 12
    assert len(dataorder.parse(_blob(capsule, "dataorder"))) == 14
    rows = ops.parse(_blob(capsule, "ops"))
    assert len(rows) == 201 and {r["step"] for r in rows} == {0, 1}
    assert len(contract.metric_rows(_blob(capsule, "metrics"))) == 24


def test_the_runtime_files_are_read() -> None:
    assert len(trace.parse((RUN / contract.TRACE_FILE).read_text())) == 12
    assert len(dataorder.parse((RUN / contract.DATA_ORDER_FILE).read_text())) == 14
    assert len(contract.metric_rows((RUN / contract.METRICS_FILE).read_text())) == 24
    assert len(resumetrace.parse((RUN / "rtrace.rank0.jsonl").read_text())) == 12
    assert len(resumetrace.parse((RESUMED / "rtrace.rank0.jsonl").read_text())) == 6


def test_process_reports_with_the_old_row_key_are_read() -> None:
    got = reports.read_reports(RUN)
    assert (got.processes, got.main_booted) == (5, True)
    checkpoints_written = {
        "checkpoints/epoch=0-step=6.ckpt",
        "checkpoints/epoch=1-step=12.ckpt",
        "checkpoints/last.ckpt",
    }
    assert got.written == {*checkpoints_written, "model.pt"}
    assert "train.py" in got.read
    assert reports.written_by(RUN) == got.written


def test_resume_events_with_the_old_row_key_are_read() -> None:
    assert len(checkpoints.read_events(RESUMED)) == 2
    restored = checkpoints.restored(RESUMED)
    assert [(r["rank"], r["path"], r["step"]) for r in restored] == [(0, "checkpoints/last.ckpt", 6)] * 2
    assert checkpoints.loaded_paths(RESUMED) == {"checkpoints/last.ckpt"}


def test_links_are_read() -> None:
    rows = trackers.noted(RUN)
    assert [(r["kind"], r["name"]) for r in rows] == [("framework", "lightning")]


def test_the_streams_compare(capsule: dict[str, str]) -> None:
    """The capsule's trace and data order against the runtime directory's copies: the same run."""
    stored, kept = trace.parse(_blob(capsule, "trace")), trace.parse((RUN / contract.TRACE_FILE).read_text())
    assert trace.compare_trace(stored, kept, Tolerance()) is None
    order = dataorder.parse(_blob(capsule, "dataorder"))
    report = dataorder.compare({0: order}, {0: dataorder.parse((RUN / contract.DATA_ORDER_FILE).read_text())})
    assert report is not None and (report.order, report.worker_seeds) == (None, None)
