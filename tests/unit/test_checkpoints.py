"""The checkpoints of a run, host side: collected into the record, seeded back, found by ref; windows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro import window
from repro.collect import checkpoints
from repro.errors import NotFoundError, UsageError
from repro.store.record import CheckpointInfo, Record, RunWarning
from repro.store.recordio import dump_record, load_record
from repro.store.runs import Store


def _state(runtime: Path, digest: str, rank: int, step: int, path: str = "") -> None:
    d = runtime / "rng"
    d.mkdir(parents=True, exist_ok=True)
    body = {"path": path, "step": step, "rank": rank, "states": {"python": [3, [rank], None]}}
    (d / f"{digest}.rank{rank}.json").write_text(json.dumps(body))


def test_collect_groups_ranks_by_checkpoint_and_survives_the_record_round_trip(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.ensure()
    runtime = tmp_path / "runtime"
    _state(runtime, "b" * 64, 0, 16, "checkpoints/last.pt")
    _state(runtime, "b" * 64, 1, 16)
    _state(runtime, "a" * 64, 0, 8, "checkpoints/last.pt")
    (runtime / "ckpt").mkdir()
    (runtime / "ckpt" / ("a" * 64)).write_bytes(b"weights")
    (runtime / "resume-events.jsonl").write_text(
        json.dumps({"event": "missing", "rank": 1, "path": "checkpoints/old.pt", "hash": "c" * 64}) + "\n"
    )
    record = Record(id="r", created="now")
    checkpoints.collect(record, runtime, store.put_fd, max_bytes=1024)
    first, second = record.results.checkpoints
    assert (first.step, first.path, first.blob is not None, first.size) == (8, "checkpoints/last.pt", True, 7)
    assert sorted(second.states) == ["0", "1"] and second.blob is None
    assert record.warnings == [
        RunWarning(
            "resume_not_exact",
            "rank 1 loaded checkpoint checkpoints/old.pt but no RNG state was recorded for it: "
            "this resume is not exact",
        )
    ]
    assert checkpoints.loaded_paths(runtime) == {"checkpoints/old.pt"}
    again = load_record(dump_record(record))
    assert again.results.checkpoints == record.results.checkpoints
    assert {second.states["0"], second.states["1"], first.blob} <= again.blobs()

    seeded = tmp_path / "resumed"
    assert checkpoints.seed_runtime(seeded, again.results.checkpoints, store.read_blob) == 3
    assert json.loads((seeded / "rng" / f"{'b' * 64}.rank1.json").read_text())["step"] == 16


def test_a_rank_killed_before_writing_its_state_is_filled_from_its_ring(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.ensure()
    runtime = tmp_path / "runtime"
    _state(runtime, "d" * 64, 0, 12, "checkpoints/ddp.pt")  # rank 0 saved at step 12; rank 1 died first
    ring = runtime / "rng" / "ring"
    ring.mkdir(parents=True)
    for step in (11, 12, 13):
        body = {"step": step, "rank": 1, "states": {"python": [3, [step], None]}}
        (ring / f"rank1.{step % 8}.json").write_text(json.dumps(body))
    record = Record(id="r", created="now")
    checkpoints.collect(record, runtime, store.put_fd, max_bytes=0)
    (info,) = record.results.checkpoints
    assert sorted(info.states) == ["0", "1"]
    assert json.loads(store.read_blob(info.states["1"]) or b"")["step"] == 12


def test_checkpoints_are_found_by_path_hash_prefix_or_step() -> None:
    record = Record(id="r", created="now")
    record.results.checkpoints = [
        CheckpointInfo("ck/a.pt", "ab12" * 16, 4),
        CheckpointInfo("ck/b.pt", "cd34" * 16, 8),
    ]
    assert checkpoints.find(record, "ck/b.pt").step == 8
    assert checkpoints.find(record, "step:4").path == "ck/a.pt"
    assert checkpoints.find(record, "cd34cd").path == "ck/b.pt"
    with pytest.raises(NotFoundError) as e:
        checkpoints.find(record, "step:5")
    assert "ck/a.pt (step 4), ck/b.pt (step 8)" in (e.value.hint or "")


def test_a_window_runs_to_the_next_checkpoint_and_needs_a_trace_and_kept_bytes() -> None:
    record = Record(id="r", created="now")
    record.results.checkpoints = [
        CheckpointInfo("a.pt", "a" * 64, 4, blob="x"),
        CheckpointInfo("b.pt", "b" * 64, 8),
    ]
    w = window.choose(record, "step:4", None, trace_length=12)
    assert (w.first, w.steps) == (
        4,
        4,
    ) and w.describe() == "window: optimizer steps 4..7, from checkpoint a.pt"
    assert window.choose(record, "a.pt", 2, trace_length=12).steps == 2
    with pytest.raises(UsageError, match="no per-step trace"):
        window.choose(record, "step:4", None, trace_length=0)
    with pytest.raises(UsageError, match="were not kept in the store"):
        window.choose(record, "step:8", None, trace_length=12)


def test_a_pending_record_is_kept_until_the_run_is_sealed(tmp_path: Path) -> None:
    store = Store(tmp_path)
    record = Record(id="20260101-000000-aaaa", created="now")
    run_dir = store.begin_run(record.id, ["python", "t.py"])
    store.write_pending(record, run_dir, {"outputs": ["outputs"], "before": {"outputs/a": [1, 2, 3]}})
    loaded = store.load_pending(record.id)
    assert loaded is not None and loaded[0].id == record.id and loaded[1]["outputs"] == ["outputs"]
    assert not store.has_record(record.id) and store.is_running(record.id)
    store.seal(record, run_dir)
    assert store.load_pending(record.id) is None and store.has_record(record.id)


def test_seeding_states_never_writes_where_a_record_names_outside_the_runtime_dir(tmp_path: Path) -> None:
    runtime = tmp_path / "run" / "runtime"
    good = CheckpointInfo(path="ck.pt", hash="ab" * 32, states={"0": "blob"})
    escaping = CheckpointInfo(path="ck.pt", hash="../../../escaped", states={"0": "blob"})
    odd_rank = CheckpointInfo(path="ck.pt", hash="cd" * 32, states={"0/../../x": "blob"})
    assert checkpoints.seed_runtime(runtime, [good, escaping, odd_rank], lambda _: b"{}") == 1
    assert [p.name for p in (runtime / "rng").iterdir()] == [f"{'ab' * 32}.rank0.json"]
    assert not list(tmp_path.rglob("escaped*")) and not list(tmp_path.rglob("x.json"))


@pytest.mark.parametrize(
    ("events", "booted", "started_over"),
    [
        ([], True, True),  # nanoGPT's default --init_from scratch: nothing loaded
        (
            [{"event": "restored", "rank": 0, "path": "out/ckpt.pt", "hash": "a" * 64, "step": 10}],
            True,
            False,
        ),
        ([{"event": "missing", "rank": 0, "path": "out/ckpt.pt", "hash": "b" * 64}], True, False),
        ([], False, False),  # the runtime never booted: no load could be seen, nothing is claimed
    ],
)
def test_a_resume_that_loaded_no_checkpoint_started_over(
    tmp_path: Path, events: list[dict[str, object]], booted: bool, started_over: bool
) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    (runtime / "resume-events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    record = Record(id="r2", created="now", resumed_from="r1")
    checkpoints.judge_resume(record, runtime, booted)
    assert record.results.resume_started_over is started_over
    codes = [w.code for w in record.warnings]
    assert codes == (["resume_started_over"] if started_over else [])
    if started_over:
        assert "--init_from=resume" in record.warnings[0].message
        assert load_record(dump_record(record)).results.resume_started_over is True
    fresh = Record(id="r0", created="now")  # not a resume: never judged
    checkpoints.judge_resume(fresh, runtime, booted)
    assert fresh.results.resume_started_over is False


def _resumed(tmp_path: Path, events: list[dict[str, object]]) -> Record:
    """A resumed run's record, collected from a runtime directory holding EVENTS."""
    store = Store(tmp_path)
    store.ensure()
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    (runtime / "resume-events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    record = Record(id="r2", created="now", resumed_from="r1")
    checkpoints.collect(record, runtime, store.put_fd, max_bytes=0)
    return record


def test_a_resumed_lightning_fit_says_its_loop_counters_may_differ_once_and_in_show(tmp_path: Path) -> None:
    """Each rank that loaded Lightning's fit-loop state says so; the record says it once, as a warning
    (`repro resume` prints its warnings at the end; `repro show` lists them; a check keeps them as notes)."""
    from repro.ui.records import show_text

    loaded = {"kind": "restored", "path": "checkpoints/last.ckpt", "hash": "a" * 64, "step": 7}
    record = _resumed(tmp_path, [
        {**loaded, "rank": 0}, {"kind": "inexact", "rank": 0, "state": "lightning_loops"},
        {**loaded, "rank": 1}, {"kind": "inexact", "rank": 1, "state": "lightning_loops"},
    ])  # fmt: skip
    (warning,) = record.warnings
    assert warning.code == "resume_lightning_loops"
    assert warning.message.startswith("Lightning's own loop counters in its checkpoint files may differ: ")
    assert (
        "batch_progress.is_last_batch" in warning.message
        and "epoch_progress.total.ready by 1" in warning.message
    )
    assert warning.message.endswith("; weights, optimizer and RNG are exact")
    assert "not exact" not in warning.message
    assert load_record(dump_record(record)).warnings == [warning]
    shown = show_text(record).splitlines()
    assert any(line.split(None, 1) == ["warning", warning.message] for line in shown), shown


def test_the_lightning_note_claims_nothing_exact_in_a_resume_that_is_not(tmp_path: Path) -> None:
    """A spoiled resume (`check --control`) is not exact: the note names the counters only."""
    record = _resumed(tmp_path, [
        {"kind": "control", "rank": 0, "spoiled": "rng"},
        {"kind": "inexact", "rank": 0, "state": "lightning_loops"},
    ])  # fmt: skip
    assert [w.code for w in record.warnings] == ["resume_not_exact", "resume_lightning_loops"]
    assert record.warnings[1].message == checkpoints.lightning_loops(exact=False)
    assert "are exact" not in record.warnings[1].message


def test_a_resume_without_lightning_or_with_an_unknown_inexact_state_has_no_such_note(tmp_path: Path) -> None:
    record = _resumed(tmp_path, [
        {"kind": "restored", "rank": 0, "path": "checkpoints/last.pt", "hash": "b" * 64, "step": 3},
        {"kind": "inexact", "rank": 0, "state": "something_else"},
    ])  # fmt: skip
    assert record.warnings == []
