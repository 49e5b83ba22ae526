"""Every stream of rows repro reads back from a run or a capsule is read up to a named bound.

Each test rewrites a run as an attacker would (a stream far over its bound, or one line longer
than the bound, with no newline at all) with the bound lowered so the test stays cheap, then reads
it where repro reads it: the rows before the cut are there, nothing past it, no traceback, and a
comparison says in one line that the stream was cut, never that the unread part is identical.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from repro.collect import checkpoints, produced, reports
from repro.compare import dataorder, ops, trace
from repro.compare.verdict import Verdict, compare_runs
from repro.integrations import trackers
from repro.rerun.sides import of_run
from repro.store import limits
from repro.store.record import Record
from repro.store.runs import LoadedRun, Store

BOUND = 4096  # every bound, lowered for the test


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


GIANT = b'{"op": "' + b"x" * (BOUND * 4)  # one line longer than the bound, never ended


def _run(tmp_path: Path, logs: dict[str, bytes], metrics: bytes | None = None, n: int = 0) -> LoadedRun:
    """A sealed run whose logs hold ``logs`` (what a capsule imported into the store looks like)."""
    store = Store(tmp_path)
    record = Record(id=f"20260101-000000-000{n}", created="2026-01-01T00:00:00+00:00")
    record.results.logs = {name: store.put_bytes(raw) for name, raw in logs.items()}
    if metrics is not None:
        record.results.metrics = store.put_bytes(metrics)
    store.seal(record, store.begin_run(record.id, record.command.argv))
    return store.load_run(record.id)


@pytest.fixture(autouse=True)
def _small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in dir(limits):
        if name.startswith("MAX_") and name.endswith("_BYTES") and name not in ("MAX_RECORD_BYTES",):
            if any(s in name for s in ("COMPARED", "METRICS", "REPORT", "LINKS", "RESUME")):
                monkeypatch.setattr(limits, name, BOUND)


def _op(i: int) -> dict[str, Any]:
    return {"op": "aten::add", "i": i, "step": 0, "phase": "fwd", "sum": 1.0}


def _explained(original: dict[int, list[dict[str, Any]]], replay: dict[int, list[dict[str, Any]]]) -> str:
    verdict = Verdict(status="diverged", mode="strict", original="a", replay="b")
    ops.explain(verdict, original, replay, 10, "the original's")
    return "\n".join(verdict.notes)


@pytest.mark.parametrize("raw", [_jsonl([_op(i) for i in range(1000)]), GIANT], ids=["long", "one-line"])
def test_an_op_stream_is_cut_at_its_bound_and_never_called_identical(tmp_path: Path, raw: bytes) -> None:
    run = _run(tmp_path, {ops.OPS_LOG: raw})
    rows = ops.streams(run.record.results.logs, run.read_blob)[0]
    assert rows[-1] == {"truncated": True, "cut": BOUND}
    assert sum(len(json.dumps(r)) + 1 for r in rows[:-1]) <= BOUND
    note = _explained({0: rows}, {0: rows})
    assert "an op stream was cut at 0.00390625 MiB" in note and "identical" not in note


def test_an_op_stream_within_its_bound_is_read_whole(tmp_path: Path) -> None:
    raw = _jsonl([_op(i) for i in range(5)])
    run = _run(tmp_path, {ops.OPS_LOG: raw})
    rows = ops.streams(run.record.results.logs, run.read_blob)[0]
    assert len(rows) == 5 and "identical" in _explained({0: rows}, {0: rows})


def _trace_rows(n: int) -> bytes:
    return _jsonl([{"step": s, "params": {"w": [1.0, 1.0]}} for s in range(n)])


def _data_rows(n: int) -> bytes:
    return _jsonl([{"loader": 0, "batch": b, "indices": list(range(8))} for b in range(n)])


STREAMS = {
    "step trace": (trace.TRACE_LOG, _trace_rows),
    "data-order log of rank 0": (dataorder.log_name(0), _data_rows),
}


@pytest.mark.parametrize("stream", sorted(STREAMS))
@pytest.mark.parametrize("giant", [False, True], ids=["long", "one-line"])
def test_a_compared_stream_is_cut_at_its_bound_and_the_verdict_says_so(
    tmp_path: Path, stream: str, giant: bool
) -> None:
    name, rows = STREAMS[stream]
    raw = GIANT if giant else rows(2000)
    a = of_run(_run(tmp_path / "a", {name: raw}, n=1))
    b = of_run(_run(tmp_path / "b", {name: raw}, n=2))
    assert a.cut == [f"the {stream} was cut at 0.00390625 MiB: nothing past it was read or compared"]
    kept = a.trace if name == trace.TRACE_LOG else a.data_order.get(0, [])
    assert 0 < len(kept) < 2000 if not giant else kept == []
    verdict = compare_runs(a, b, "strict")
    assert f"{a.label}: {a.cut[0]}" in verdict.notes and f"{b.label}: {b.cut[0]}" in verdict.notes


@pytest.mark.parametrize("giant", [False, True], ids=["long", "one-line"])
def test_metrics_and_stdout_are_cut_at_their_bounds(tmp_path: Path, giant: bool) -> None:
    metrics = GIANT if giant else _jsonl([{"name": "loss", "value": 0.5, "step": s} for s in range(2000)])
    stdout = GIANT if giant else b"epoch 0 loss 0.5\n" * 2000
    got = of_run(_run(tmp_path, {"stdout": stdout}, metrics=metrics))
    assert len(got.stdout) <= BOUND and (got.stdout == "" if giant else got.stdout.endswith("0.5\n"))
    assert (got.metrics == []) if giant else 0 < len(got.metrics) < 2000
    assert got.cut == [
        "the metrics log was cut at 0.00390625 MiB: nothing past it was read or compared",
        "stdout was cut at 0.00390625 MiB: nothing past it was read or compared",
    ]


def _runtime_file(tmp_path: Path, rel: str, raw: bytes) -> Path:
    (tmp_path / rel).write_bytes(raw)
    return tmp_path


@pytest.mark.parametrize("giant", [False, True], ids=["long", "one-line"])
def test_the_run_s_own_streams_are_read_up_to_their_bounds(tmp_path: Path, giant: bool) -> None:
    """Proc reports, links, resume events and metrics a run writes (it may write without end)."""
    report = GIANT if giant else _jsonl([{"e": "w", "p": f"out/{i}.pt"} for i in range(2000)])
    runtime = _runtime_file(tmp_path, "proc.1.jsonl", report)
    written = reports.written_by(runtime)
    assert (written == set()) if giant else 0 < len(written) < 2000
    facts = [{"kind": "wandb", "url": f"http://127.0.0.1/{i}"} for i in range(2000)]
    _runtime_file(tmp_path, "links.jsonl", GIANT if giant else _jsonl(facts))
    found = len(trackers.noted(runtime))
    assert found == 0 if giant else 0 < found < 2000
    events = GIANT if giant else _jsonl([{"event": "restored", "path": f"c{i}.pt"} for i in range(2000)])
    _runtime_file(tmp_path, checkpoints.RESUME_EVENTS.file, events)
    found = len(checkpoints.read_events(runtime))
    assert found == 0 if giant else 0 < found < 2000
    metrics = GIANT if giant else _jsonl([{"name": "loss", "value": 0.5} for _ in range(2000)])
    _runtime_file(tmp_path, "metrics.jsonl", metrics)
    kept = produced.read_stream(runtime, "metrics.jsonl", limits.MAX_METRICS_BYTES)
    assert kept is not None and len(kept) <= BOUND and (kept == b"" if giant else kept.endswith(b"}\n"))
