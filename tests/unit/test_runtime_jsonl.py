"""The runtime's one JSON-lines appender: naming from the contract, the rank reader, the byte cap,
fork safety, and an OSError that ends a stream instead of reaching the training script."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from repro.collect import reports
from repro.runtime import contract, jsonl, procreport


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(contract.RUN_ID_ENV, "r1")
    monkeypatch.setenv(contract.RUNTIME_DIR_ENV, str(tmp_path))
    monkeypatch.delenv("RANK", raising=False)
    return tmp_path


@pytest.mark.parametrize(("text", "rank"), [(None, -1), ("", -1), ("0", 0), ("3", 3), ("x", -1), ("-1", -1)])
def test_the_rank_is_read_once_with_one_meaning(
    monkeypatch: pytest.MonkeyPatch, text: str | None, rank: int
) -> None:
    if text is None:
        monkeypatch.delenv("RANK", raising=False)
    else:
        monkeypatch.setenv("RANK", text)
    assert jsonl.rank() == rank


@pytest.mark.parametrize(
    ("stream", "rank", "name"),
    [
        ("trace", None, "trace.jsonl"), ("trace", "0", "trace.rank0.jsonl"), ("links", "0", "links.jsonl"),
        ("links", "2", "links.rank2.jsonl"), ("metrics", None, "metrics.jsonl"),
        ("rtrace", None, "rtrace.rank0.jsonl"), ("resume_events", "3", "resume-events.jsonl"),
    ],
)  # fmt: skip
def test_each_stream_is_named_by_the_contract(
    runtime: Path, monkeypatch: pytest.MonkeyPatch, stream: str, rank: str | None, name: str
) -> None:
    if rank is not None:
        monkeypatch.setenv("RANK", rank)
    jsonl.Appender(stream).write({"a": 1})
    assert [p.name for p in runtime.iterdir()] == [name]


def test_a_capped_stream_ends_with_one_truncated_row(runtime: Path) -> None:
    ended: list[bool] = []
    appender = jsonl.Appender("ops", flush_rows=4, max_bytes=200, on_end=lambda: ended.append(True))
    for i in range(100):
        appender.write({"i": i, "pad": "x" * 10})
    appender.flush()
    rows = [json.loads(line) for line in (runtime / "ops.jsonl").read_text().splitlines()]
    assert rows[-1] == {"truncated": True} and all("i" in r for r in rows[:-1]) and len(rows) > 1
    assert ended == [True] and len((runtime / "ops.jsonl").read_bytes()) < 300


def test_an_oserror_ends_the_stream_and_is_reported_once(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = runtime / "gone"  # a removed directory: the stream's file cannot be opened
    appender = jsonl.Appender("trace", path=str(gone / "trace.jsonl"))
    monkeypatch.setattr(procreport, "_seen", set())
    for i in range(3):
        appender.write({"step": i})  # never raises into the script
    assert appender.ended
    found = reports.read_reports(runtime)
    assert (
        len(found.errors) == 1
        and "the trace stream" in found.errors[0]
        and "FileNotFoundError" in found.errors[0]
    )


def test_a_forked_child_appends_through_its_own_descriptor(runtime: Path) -> None:
    appender = jsonl.Appender("metrics")
    appender.write({"name": "loss", "value": 1.0, "step": 0})
    pid = os.fork()
    if pid == 0:
        appender.write({"name": "loss", "value": 2.0, "step": 1})
        os._exit(0)
    os.waitpid(pid, 0)
    appender.write({"name": "loss", "value": 3.0, "step": 2})
    rows = contract.metric_rows((runtime / contract.METRICS_FILE).read_text())
    assert sorted(r["value"] for r in rows) == [1.0, 2.0, 3.0]


def test_rows_name_their_kind_under_one_key_and_old_keys_are_read(runtime: Path) -> None:
    procreport.emit("w", "", p="model.pt")
    row = json.loads(next(runtime.glob("proc.*.jsonl")).read_text())
    assert row == {"kind": "w", "p": "model.pt"}
    assert [contract.row_kind(r) for r in (row, {"e": "boot"}, {"event": "restored"}, {})] == [
        "w",
        "boot",
        "restored",
        None,
    ]


def test_a_row_written_later_is_written_out_with_the_buffer_in_its_place(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    rendered: list[object] = []

    def dumps(row: object) -> str:
        rendered.append(row)
        return json.dumps(row)

    buffered = jsonl.Appender("metrics", path=str(path), flush_rows=100, dumps=dumps)
    buffered.write({"a": 1})
    buffered.write_later({"b": 2}, 8)
    buffered.write_later({"c": object()}, 8)  # not JSON: dropped alone, as `write` drops it
    buffered.write({"d": 4})
    assert rendered == [{"a": 1}, {"d": 4}] and not path.exists()  # written out only with the buffer
    buffered.flush()
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"a": 1}, {"b": 2}, {"d": 4}]
    unbuffered = jsonl.Appender("metrics", path=str(tmp_path / "u.jsonl"))
    unbuffered.write_later({"e": 5}, 8)  # nothing to wait for: written at once
    assert json.loads((tmp_path / "u.jsonl").read_text()) == {"e": 5}
