"""Known artifact formats compared by content: metric tables and TensorBoard event files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.compare import tensorboard
from repro.compare.tables import compare_tables
from repro.compare.tolerance import STRICT, Tolerance
from repro.compare.verdict import compare_runs
from tests.builders import side


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    return a, b


# --------------------------------------------------------------------------- tables


def test_hf_style_results_json_is_identical_apart_from_its_runtime_fields(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    base = {"epoch": 3.0, "eval_loss": 0.4123, "eval_accuracy": 0.875}
    (a / "all_results.json").write_text(
        json.dumps({**base, "train_runtime": 3.2, "train_samples_per_second": 31.2, "eval_runtime": 0.4})
    )
    (b / "all_results.json").write_text(
        json.dumps({**base, "train_runtime": 4.9, "train_samples_per_second": 20.4, "eval_runtime": 0.7})
    )
    v = compare_runs(side(a), side(b), "strict")
    assert v.status == "identical"
    o = v.outputs[0]
    assert o.status == "same" and o.kind == "table" and o.values is not None
    assert o.values.ignored == ["eval_runtime", "train_runtime", "train_samples_per_second"]
    assert "train_runtime" in (o.note or "")

    (b / "all_results.json").write_text(json.dumps({**base, "eval_loss": 0.4125, "train_runtime": 4.9}))
    v = compare_runs(side(a), side(b), "gpu")
    assert v.status == "diverged"
    reason = v.reasons[0]
    assert (reason.code, reason.path) == ("metric_differs", "all_results.json")
    assert (reason.fields["name"], reason.fields["original"], reason.fields["replay"]) == (
        "eval_loss",
        0.4123,
        0.4125,
    )


def test_jsonl_rows_compare_by_step_within_tolerance(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    rows = [{"step": s, "loss": 1.0 / s, "time": 0.01 * s} for s in (1, 2, 3)]
    (a / "log.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    nudged = [{**r, "loss": r["loss"] * (1 + 1e-7), "time": r["time"] * 2} for r in rows]
    (b / "log.jsonl").write_text("\n".join(json.dumps(r) for r in nudged) + "\n")
    report = compare_tables(a / "log.jsonl", b / "log.jsonl", Tolerance(), ".jsonl")
    assert report.ignored == ["time"] and report.differing == 3 and report.within_tolerance
    assert report.first is not None and (report.first.name, report.first.step) == ("loss", 1)
    assert compare_runs(side(a), side(b), "gpu").status == "within_tolerance"
    assert compare_runs(side(a), side(b), "strict").status == "diverged"


def test_csv_metrics_name_column_and_step(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    (a / "metrics.csv").write_text(
        "epoch,step,train_loss,val_acc,epoch_time\n0,10,0.693,0.50,1.2\n1,20,0.512,0.75,1.1\n"
    )
    (b / "metrics.csv").write_text(
        "epoch,step,train_loss,val_acc,epoch_time\n0,10,0.693,0.50,2.9\n1,20,0.530,0.75,3.0\n"
    )
    report = compare_tables(a / "metrics.csv", b / "metrics.csv", STRICT, ".csv")
    assert report.ignored == ["epoch_time"] and report.differing == 1
    assert report.first is not None
    assert (report.first.name, report.first.step, report.first.original, report.first.replay) == (
        "train_loss",
        20,
        0.512,
        0.530,
    )
    (b / "metrics.csv").write_text("epoch,step,train_loss\n0,10,0.693\n")
    report = compare_tables(a / "metrics.csv", b / "metrics.csv", STRICT, ".csv")
    assert "val_acc" in report.only_original and not report.within_tolerance


def test_a_malformed_metric_file_is_a_changed_output_with_a_note(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    (a / "r.json").write_text('{"loss": 1}')
    (b / "r.json").write_text('{"loss": ')
    v = compare_runs(side(a), side(b), "gpu")
    assert v.status == "diverged" and "unreadable" in (v.outputs[0].note or "")
    assert v.reasons[0].code == "output_differs"


# --------------------------------------------------------------------------- TensorBoard


def _write_events(logdir: Path, losses: list[float]) -> None:
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(logdir)) as w:
        for step, loss in enumerate(losses, 1):
            w.add_scalar("train/loss", loss, step)
        w.add_text("note", "done", len(losses))


def test_event_files_compare_by_tag_and_step_not_by_name(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    _write_events(a / "runs" / "Nov22_10-00-00_hostA", [0.9, 0.7, 0.5])
    _write_events(b / "runs" / "Nov22_10-00-07_hostB", [0.9, 0.7, 0.5])
    v = compare_runs(side(a), side(b), "strict")
    assert v.status == "identical", v.reasons
    (o,) = v.outputs
    assert (o.kind, o.status, o.path) == (
        "tensorboard",
        "same",
        "runs/Nov22_10-00-00_hostA/events.out.tfevents.*",
    )
    assert o.replay_path == "runs/Nov22_10-00-07_hostB" and o.values is not None and o.values.compared == 4
    assert v.summary == "identical: 1 output identical (1 equal by content), metrics and stdout equal"

    _write_events(b / "runs" / "Nov22_10-00-07_hostB", [0.9, 0.7, 0.25])
    (old,) = [p for p in sorted((b / "runs" / "Nov22_10-00-07_hostB").iterdir())][:1]
    old.unlink()
    v = compare_runs(side(a), side(b), "gpu")
    assert v.status == "diverged"
    r = v.reasons[0]
    assert (r.code, r.fields["name"], r.fields["step"], r.fields["original"], r.fields["replay"]) == (
        "metric_differs",
        "train/loss",
        3,
        0.5,
        0.25,
    )


def test_without_the_tensorboard_package_event_files_compare_by_bytes(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = dirs
    _write_events(a / "tb", [0.5])
    _write_events(b / "tb", [0.5])
    monkeypatch.setattr(tensorboard, "available", lambda: False)
    v = compare_runs(side(a), side(b), "strict")
    (o,) = v.outputs
    assert o.kind == "tensorboard" and o.status == "changed" and v.status == "diverged"
    assert "pip install tensorboard" in (o.note or "") and v.reasons[0].code == "output_differs"


def test_event_directories_pair_by_path_then_parent_and_tags_then_tags() -> None:
    loss, acc = frozenset({"loss"}), frozenset({"loss", "acc"})
    pairs, only_a, only_b = tensorboard.pair_dirs(
        {"tb/fixed": loss, "runs/Nov22_a": acc, "hp/1700000000.1": loss, "gone": acc},
        {"tb/fixed": loss, "runs/Nov22_b": acc, "hp/1700000009.9": loss},
    )
    assert sorted(pairs) == [
        ("hp/1700000000.1", "hp/1700000009.9"),
        ("runs/Nov22_a", "runs/Nov22_b"),
        ("tb/fixed", "tb/fixed"),
    ]
    assert only_a == ["gone"] and only_b == []
    # the one directory left on each side under one parent pairs, so a new tag reads as a new tag
    pairs, only_a, only_b = tensorboard.pair_dirs({"runs/Nov22_a": loss}, {"runs/Nov22_b": acc})
    assert (pairs, only_a, only_b) == ([("runs/Nov22_a", "runs/Nov22_b")], [], [])
