"""The comparison engine behind `repro replay` and `repro check`."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors.numpy
import safetensors.torch
import torch

from repro.compare.verdict import (
    DEFAULT_TOLERANCES,
    Side,
    Tolerance,
    UnreadableTensorFile,
    compare_all,
    compare_metrics,
    compare_runs,
    compare_stdout,
    compare_tensor_files,
    load_tensors,
    normalise_line,
    worst_status,
)
from repro.errors import ExitCode, UsageError
from repro.store.record import FileEntry, SharedWrite
from tests.builders import side

# --------------------------------------------------------------------------- helpers


def state_dict(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "fc1.weight": torch.randn(8, 4, generator=g),
        "fc1.bias": torch.randn(8, generator=g),
        "fc2.weight": torch.randn(2, 8, generator=g),
        "bn.num_batches_tracked": torch.tensor(5),
    }


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    return a, b


# --------------------------------------------------------------------------- tensor files


def test_torch_checkpoints_differing_in_one_tensor(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    sd = state_dict()
    torch.save({"model": sd, "epoch": 3}, a / "model.pt")
    changed = {k: v.clone() for k, v in sd.items()}
    changed["fc1.bias"][3] += 0.25
    torch.save({"model": changed, "epoch": 3}, b / "model.pt")

    report = compare_tensor_files(a / "model.pt", b / "model.pt", Tolerance())

    assert [d.name for d in report.differing] == ["model.fc1.bias"]
    d = report.differing[0]
    assert d.max_abs == pytest.approx(0.25, abs=1e-6)
    assert d.shape == [8] and d.dtype == "float32"
    assert d.differing == 1 and d.numel == 8 and not d.within_tolerance
    assert report.identical == 4  # three other tensors and the epoch number
    assert not report.structural and not report.within_tolerance
    assert report.max_abs == pytest.approx(0.25, abs=1e-6)


def test_torch_checkpoint_nested_lists_flattened_and_structure_compared(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    opt = {"state": {0: {"exp_avg": torch.ones(3)}}, "param_groups": [{"lr": 0.1, "params": [0]}]}
    torch.save({"optimizer": opt, "w": torch.zeros(2, 3)}, a / "ckpt.pth")
    opt_b = {"state": {0: {"exp_avg": torch.ones(3)}}, "param_groups": [{"lr": 0.2, "params": [0]}]}
    torch.save({"optimizer": opt_b, "w": torch.zeros(3, 2), "extra": torch.ones(1)}, b / "ckpt.pth")

    names = set(load_tensors(a / "ckpt.pth"))
    assert names == {
        "optimizer.state.0.exp_avg",
        "optimizer.param_groups.0.lr",
        "optimizer.param_groups.0.params.0",
        "w",
    }

    report = compare_tensor_files(a / "ckpt.pth", b / "ckpt.pth", Tolerance())
    assert report.only_replay == ["extra"]
    assert [(m.name, m.reason, m.original, m.replay) for m in report.mismatched] == [
        ("w", "shape", "[2, 3]", "[3, 2]")
    ]
    assert [d.name for d in report.differing] == ["optimizer.param_groups.0.lr"]
    assert report.structural


def test_dtype_mismatch_is_structural(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    torch.save({"w": torch.zeros(4)}, a / "m.pt")
    torch.save({"w": torch.zeros(4, dtype=torch.float64)}, b / "m.pt")
    report = compare_tensor_files(a / "m.pt", b / "m.pt", Tolerance())
    assert [(m.reason, m.original, m.replay) for m in report.mismatched] == [("dtype", "float32", "float64")]


def test_bfloat16_tensors_compare(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    torch.save({"w": torch.ones(4, dtype=torch.bfloat16)}, a / "m.pt")
    torch.save({"w": torch.tensor([1, 1, 1, 2], dtype=torch.bfloat16)}, b / "m.pt")
    report = compare_tensor_files(a / "m.pt", b / "m.pt", Tolerance())
    assert report.differing[0].dtype == "bfloat16" and report.differing[0].max_abs == 1.0


def test_safetensors_written_by_the_library(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    steps = np.array([1, 2, 3], dtype=np.int64)
    safetensors.numpy.save_file({"w": w, "steps": steps}, str(a / "model.safetensors"), {"format": "pt"})
    w2 = w.copy()
    w2[2, 1] = 9.5
    safetensors.numpy.save_file({"w": w2, "steps": steps}, str(b / "model.safetensors"), {"format": "pt"})

    loaded = load_tensors(a / "model.safetensors")
    np.testing.assert_array_equal(loaded["w"], w)
    np.testing.assert_array_equal(loaded["steps"], steps)
    assert loaded["__metadata__.format"] == "pt"

    report = compare_tensor_files(a / "model.safetensors", b / "model.safetensors", Tolerance())
    assert [(d.name, d.shape, d.dtype, d.max_abs) for d in report.differing] == [
        ("w", [3, 4], "float32", 0.5)
    ]
    assert report.differing[0].max_rel == pytest.approx(0.5 / 9)


def test_safetensors_bfloat16_decoded_exactly(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    values = np.array([1.0, -2.5, 3.140625], dtype=np.float32)
    x = torch.from_numpy(values).to(torch.bfloat16)
    safetensors.torch.save_file({"x": x}, str(a / "x.safetensors"))
    np.testing.assert_array_equal(load_tensors(a / "x.safetensors")["x"], values)
    safetensors.torch.save_file({"x": x + 1}, str(b / "x.safetensors"))
    report = compare_tensor_files(a / "x.safetensors", b / "x.safetensors", Tolerance())
    assert [(d.name, d.dtype, d.max_abs) for d in report.differing] == [("x", "bfloat16", 1.0)]


@pytest.mark.parametrize(
    "raw",
    [
        b"\x01\x02",
        struct.pack("<Q", 10_000) + b"{}",
        struct.pack("<Q", 2) + b"[]",
        struct.pack("<Q", 60)
        + json.dumps({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 99]}}).encode()[:60],
    ],
)
def test_malformed_safetensors_are_reported(tmp_path: Path, raw: bytes) -> None:
    (tmp_path / "bad.safetensors").write_bytes(raw)
    with pytest.raises(UnreadableTensorFile):
        load_tensors(tmp_path / "bad.safetensors")


def test_npy_and_npz(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    x = np.linspace(0, 1, 10)
    np.save(a / "pred.npy", x)
    np.save(b / "pred.npy", x + np.where(np.arange(10) == 7, 1e-3, 0.0))
    np.savez(a / "arrays.npz", emb=np.ones((2, 2), np.float32), ids=np.arange(3))
    np.savez(b / "arrays.npz", emb=np.ones((2, 2), np.float32), ids=np.array([0, 1, 5]))

    npy = compare_tensor_files(a / "pred.npy", b / "pred.npy", Tolerance())
    assert [d.name for d in npy.differing] == ["array"]
    assert npy.max_abs == pytest.approx(1e-3)

    npz = compare_tensor_files(a / "arrays.npz", b / "arrays.npz", Tolerance())
    assert [(d.name, d.max_abs, d.differing) for d in npz.differing] == [("ids", 3.0, 1)]
    assert npz.identical == 1


def test_nan_matches_nan_but_not_a_number(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.array([np.nan, 1.0, np.inf]))
    np.save(tmp_path / "b.npy", np.array([np.nan, 1.0, np.inf]))
    np.save(tmp_path / "c.npy", np.array([1.0, 1.0, np.inf]))
    same = compare_tensor_files(tmp_path / "a.npy", tmp_path / "b.npy", Tolerance())
    assert same.identical == 1 and not same.differing
    other = compare_tensor_files(tmp_path / "a.npy", tmp_path / "c.npy", Tolerance(atol=10, rtol=10))
    assert other.differing[0].max_abs == float("inf") and not other.within_tolerance


def test_torch_file_needing_arbitrary_code_is_unreadable(tmp_path: Path) -> None:
    torch.save({"cfg": _Config()}, tmp_path / "m.pt")
    with pytest.raises(UnreadableTensorFile, match="m.pt"):
        load_tensors(tmp_path / "m.pt")


class _Config:
    pass


# --------------------------------------------------------------------------- runs: verdicts


def test_identical_outputs_are_identical(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    for d in dirs:
        torch.save(state_dict(), d / "model.pt")
        (d / "log.txt").write_text("done\n")
    metrics = [{"name": "loss", "value": 0.5, "step": 1}]
    v = compare_runs(side(a, "A", metrics, "loss 0.5\n"), side(b, "B", metrics, "loss 0.5\n"), "strict")
    assert v.status == "identical" and v.reproduced and v.exit_code == ExitCode.OK
    assert [o.status for o in v.outputs] == ["same", "same"]
    assert v.metrics is None and v.stdout is None and v.max_abs is None
    assert v.summary.startswith("identical")


def test_non_tensor_file_differing_diverges_naming_it(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    (a / "predictions.csv").write_text("id,label\n1,cat\n")
    (b / "predictions.csv").write_text("id,label\n1,dog\n")
    for mode in ("strict", "gpu", "off"):
        v = compare_runs(side(a), side(b), mode)
        assert v.status == "diverged", mode
        o = v.outputs[0]
        assert o.status == "changed" and o.kind == "table" and o.values is not None
        first = o.values.first
        assert first is not None and (first.name, first.original, first.replay) == ("label", "cat", "dog")
        assert "predictions.csv" in v.summary and v.reasons[0].code == "metric_differs"
    assert v.exit_code == ExitCode.NOT_REPRODUCED


def test_missing_and_added_outputs_diverge(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    (a / "only_a.txt").write_text("x")
    (b / "only_b.txt").write_text("y")
    v = compare_runs(side(a), side(b), "gpu")
    assert v.status == "diverged"
    assert [(o.path, o.status) for o in v.outputs] == [("only_a.txt", "missing"), ("only_b.txt", "added")]


def test_tiny_float_difference_strict_vs_gpu(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    sd = state_dict()
    torch.save(sd, a / "model.pt")
    nudged = {k: v.clone() for k, v in sd.items()}
    nudged["fc2.weight"][0, 0] = torch.nextafter(nudged["fc2.weight"][0, 0], torch.tensor(10.0))
    torch.save(nudged, b / "model.pt")

    strict = compare_runs(side(a), side(b), "strict")
    assert strict.status == "diverged"
    assert strict.outputs[0].tensors is not None
    assert strict.outputs[0].tensors.differing[0].name == "fc2.weight"
    assert "fc2.weight" in strict.summary

    gpu = compare_runs(side(a), side(b), "gpu")
    assert gpu.status == "within_tolerance" and gpu.reproduced
    assert gpu.max_abs is not None and 0 < gpu.max_abs < 1e-6
    assert gpu.tolerance == DEFAULT_TOLERANCES["gpu"]
    assert gpu.reasons == []

    tight = compare_runs(side(a), side(b), "gpu", Tolerance(atol=0, rtol=0))
    assert tight.status == "diverged"


def test_large_difference_diverges_in_gpu_mode(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    sd = state_dict()
    torch.save(sd, a / "model.pt")
    torch.save({**sd, "fc1.weight": sd["fc1.weight"] + 0.01}, b / "model.pt")
    v = compare_runs(side(a), side(b), "gpu")
    assert v.status == "diverged"
    assert v.reasons[0].code == "tensor_differs" and v.reasons[0].fields["tensor"] == "fc1.weight"
    assert "fc1.weight" in v.reasons[0].message and v.max_abs == pytest.approx(0.01, rel=1e-3)
    off = compare_runs(side(a), side(b), "off", Tolerance(atol=0.1, rtol=0))
    assert off.status == "within_tolerance"


def test_tensor_file_bytes_not_kept_diverges(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    np.save(a / "x.npy", np.zeros(3))
    np.save(b / "x.npy", np.full(3, 1e-9))
    original = side(a)
    original.open_output = lambda e: None
    v = compare_runs(original, side(b), "gpu")
    assert v.status == "diverged" and "not kept" in (v.outputs[0].note or "")


def test_failed_replay_is_failed_regardless(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    for d in dirs:
        (d / "out.txt").write_text("same")
    v = compare_runs(side(a), side(b, "B", exit_code=1, status="failed"), "gpu")
    assert v.status == "failed" and not v.reproduced
    assert v.exit_code == ExitCode.COMMAND_FAILED
    assert v.summary.startswith("failed") and "status 1" in v.summary
    interrupted = compare_runs(side(a), side(b, status="interrupted"), "strict")
    assert interrupted.status == "failed"
    nonzero = compare_runs(side(a), side(b, exit_code=2), "strict")
    assert nonzero.status == "failed"


def test_unknown_mode_is_a_usage_error(dirs: tuple[Path, Path]) -> None:
    with pytest.raises(UsageError):
        compare_runs(side(dirs[0]), side(dirs[1]), "fast")


def test_compare_all_for_repeated_runs(tmp_path: Path) -> None:
    roots = []
    for i, text in enumerate(["a", "a", "b"]):
        root = tmp_path / str(i)
        root.mkdir()
        (root / "out.txt").write_text(text)
        roots.append(side(root, f"run{i + 1}"))
    verdicts = compare_all(roots, "strict")
    assert [(v.original, v.replay, v.status) for v in verdicts] == [
        ("run1", "run2", "identical"),
        ("run1", "run3", "diverged"),
    ]
    assert worst_status(verdicts) == "diverged"
    with pytest.raises(UsageError):
        compare_all(roots[:1], "strict")


def test_verdict_to_dict_is_json(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    np.save(a / "x.npy", np.array([0.0, 1.0]))
    np.save(b / "x.npy", np.array([1.0, 1.0]))
    v = compare_runs(side(a), side(b), "gpu")
    v.notes.append("backend changed: docker -> local")
    data = json.loads(json.dumps(v.to_dict(), allow_nan=False))
    assert data["status"] == "diverged" and data["outputs"][0]["tensors"]["max_rel"] == "inf"
    assert data["notes"] == ["backend changed: docker -> local"]


# --------------------------------------------------------------------------- metrics


def _series(losses: list[float], accs: list[float] | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for step, loss in enumerate(losses, start=1):
        rows.append({"name": "loss", "value": loss, "step": step, "time": 1000.0 + step})
        if accs is not None:
            rows.append({"name": "acc", "value": accs[step - 1], "step": step})
    return rows


def test_metric_first_divergence_step_name_and_values() -> None:
    a = _series([1.0, 0.8, 0.6, 0.5], [0.1, 0.2, 0.3, 0.4])
    b = _series([1.0, 0.8, 0.6, 0.4], [0.1, 0.2, 0.35, 0.45])
    m = compare_metrics(a, b, Tolerance())
    assert m is not None
    assert (m.name, m.step, m.original, m.replay, m.kind) == ("acc", 3, 0.3, 0.35, "value")
    assert m.abs_diff == pytest.approx(0.05) and not m.within_tolerance
    assert m.differing == 3 and m.max_abs == pytest.approx(0.1)


def test_metric_timestamps_in_rows_are_ignored() -> None:
    a = _series([1.0, 0.5])
    b = [dict(r, time=r["time"] + 50) for r in a]
    assert compare_metrics(a, b, Tolerance(0, 0)) is None


def test_a_harvested_series_on_one_side_only_is_left_out_but_a_logged_one_is_missing() -> None:
    a = _series([1.0, 0.5])
    events = [{"name": "Loss/train", "value": 1.0, "step": 1, "harvested": True}]
    assert compare_metrics(a + events, a, Tolerance(0, 0)) is None  # no tensorboard on one machine
    assert compare_metrics(a, a + events, Tolerance(0, 0)) is None
    m = compare_metrics(a + events, a + events[:0] + [{**events[0], "value": 2.0}], Tolerance(0, 0))
    assert m is not None and (m.name, m.kind) == ("Loss/train", "value")
    logged = [{"name": "acc", "value": 0.5, "step": 1}]
    m = compare_metrics(a + logged, a, Tolerance(0, 0))
    assert m is not None and (m.name, m.kind) == ("acc", "missing")


def test_metric_length_mismatch() -> None:
    m = compare_metrics(_series([1.0, 0.5, 0.4]), _series([1.0, 0.5]), Tolerance())
    assert m is not None and (m.kind, m.name, m.step, m.original, m.replay) == (
        "length",
        "loss",
        3,
        0.4,
        None,
    )
    assert (m.original_count, m.replay_count) == (3, 2)
    extra = compare_metrics(_series([1.0]), _series([1.0, 0.5]), Tolerance())
    assert extra is not None and (extra.kind, extra.step, extra.replay) == ("length", 2, 0.5)
    missing = compare_metrics(
        _series([1.0]), _series([1.0]) + [{"name": "lr", "value": 0.1, "step": 1}], Tolerance()
    )
    assert missing is not None and (missing.kind, missing.name) == ("missing", "lr")


def test_metric_steps_out_of_line() -> None:
    a = [{"name": "loss", "value": 1.0, "step": 10}]
    b = [{"name": "loss", "value": 1.0, "step": 11}]
    m = compare_metrics(a, b, Tolerance())
    assert m is not None and (m.kind, m.original, m.replay) == ("step", 10, 11)


def test_metric_within_tolerance_then_beyond_reports_the_decisive_one(dirs: tuple[Path, Path]) -> None:
    a = _series([1.0, 0.8, 0.6])
    b = _series([1.0 + 1e-9, 0.8, 0.7])
    m = compare_metrics(a, b, Tolerance())
    assert m is not None and (m.step, m.within_tolerance) == (3, False)
    only_tiny = compare_metrics(a, _series([1.0 + 1e-9, 0.8, 0.6]), Tolerance())
    assert only_tiny is not None and only_tiny.step == 1 and only_tiny.within_tolerance
    strict = compare_runs(
        side(dirs[0], metrics=a), side(dirs[1], metrics=_series([1.0 + 1e-9, 0.8, 0.6])), "strict"
    )
    gpu = compare_runs(
        side(dirs[0], metrics=a), side(dirs[1], metrics=_series([1.0 + 1e-9, 0.8, 0.6])), "gpu"
    )
    assert (strict.status, gpu.status) == ("diverged", "within_tolerance")
    assert "metric loss diverges at step 1" in strict.summary


# --------------------------------------------------------------------------- stdout


ORIGINAL_LOG = """\
2024-05-01 12:00:00,123 INFO starting training
epoch 1 loss 0.912345 took 1.23s
epoch 2 loss 0.712345 took 1.10s
100%|##########| 50/50 [00:03<00:00, 14.52it/s]
elapsed: 7.4
step time 12.5 ms/step
final loss 0.612345
"""

REPLAY_LOG = """\
2025-01-09T08:30:59Z INFO starting training
epoch 1 loss 0.912345 took 2.50s
epoch 2 loss 0.712345 took 0.98s
100%|##########| 50/50 [00:05<00:00, 9.80it/s]
elapsed: 12.9
step time 11.0 ms/step
final loss 0.612345
"""


def test_stdout_timestamps_and_durations_ignored() -> None:
    assert compare_stdout(ORIGINAL_LOG, REPLAY_LOG, Tolerance(0, 0)) is None


def test_stdout_first_differing_line() -> None:
    replay = REPLAY_LOG.replace("epoch 2 loss 0.712345 took 0.98s", "epoch 2 loss 0.799999 took 0.98s")
    s = compare_stdout(ORIGINAL_LOG, replay, Tolerance())
    assert s is not None
    assert s.line == 3
    assert s.original == "epoch 2 loss 0.712345 took 1.10s"
    assert s.replay == "epoch 2 loss 0.799999 took 0.98s"
    assert not s.within_tolerance and s.differing == 1


def test_stdout_numbers_outside_timing_lines_are_not_normalised() -> None:
    assert normalise_line("loss 0.5 acc 0.9") == "loss 0.5 acc 0.9"
    assert normalise_line("epoch 3 took 1.5s") == "epoch 3 took <t>"
    assert normalise_line("2024-05-01T10:00:00 loss=0.5") == "<t> loss=0.5"


def test_stdout_extra_line_and_progress_redraws() -> None:
    s = compare_stdout("a\nb\n", "a\nb\nc\n", Tolerance())
    assert s is not None and (s.line, s.original, s.replay) == (3, None, "c")
    assert compare_stdout("10%\r50%\r100%\ndone\n", "100%\ndone\n", Tolerance(0, 0)) is None


def test_stdout_printed_numbers_within_tolerance(dirs: tuple[Path, Path]) -> None:
    tol = DEFAULT_TOLERANCES["gpu"]
    near = compare_stdout("loss 0.5123\n", "loss 0.5124\n", tol)  # a last-digit rounding flip
    assert near is not None and near.within_tolerance and near.max_abs == pytest.approx(1e-4)
    far = compare_stdout("loss 0.5123\n", "loss 0.5127\n", tol)
    assert far is not None and not far.within_tolerance
    coarse = compare_stdout("loss 0.8\n", "loss 0.9\n", tol)
    assert coarse is not None and not coarse.within_tolerance
    steps = compare_stdout("step 10\n", "step 11\n", tol)
    assert steps is not None and not steps.within_tolerance
    a, b = dirs
    assert compare_runs(side(a, stdout="loss 0.5123\n"), side(b, stdout="loss 0.5124\n"), "gpu").status == (
        "within_tolerance"
    )
    strict = compare_runs(side(a, stdout="loss 0.5123\n"), side(b, stdout="loss 0.5124\n"), "strict")
    assert strict.status == "diverged" and "stdout differs at line 1" in strict.summary


def test_importing_compare_and_its_renderer_loads_neither_torch_nor_numpy() -> None:
    import subprocess
    import sys

    code = (
        "import sys, repro.compare.verdict, repro.ui.verdict; "
        "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_outputs_without_tensor_files_never_load_torch(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    (a / "x.txt").write_text("1")
    (b / "x.txt").write_text("2")
    opened: list[str] = []
    original, replay = side(a), side(b)

    def spy(e: FileEntry) -> Path | None:
        opened.append(e.path)
        return None

    original.open_output = spy
    assert compare_runs(original, replay, "gpu").status == "diverged"
    assert opened == []


def test_strict_reasons_name_only_the_parts_that_differ(tmp_path: Path) -> None:
    same = FileEntry("outputs/model.pt", 3, "aa", False)

    def side(stdout: str) -> Side:
        return Side("x", [same], lambda e: None, [], stdout)

    verdict = compare_runs(side("a\nb\n"), side("a\nc\n"), "strict")
    assert verdict.status == "diverged"
    assert [(r.code, r.message) for r in verdict.reasons] == [("log_differs", "stdout differs at line 2")]


def test_tensor_report_reads_suffixless_blobs_by_the_output_name(tmp_path: Path) -> None:
    a, b = {"w": torch.zeros(3), "b": torch.ones(2)}, {"w": torch.zeros(3), "b": torch.tensor([1.0, 1.5])}
    blobs = {}
    for label, sd in (("a", a), ("b", b)):
        blob = tmp_path / f"blob-{label}"  # content-addressed names carry no suffix
        torch.save(sd, blob)
        blobs[label] = blob
    ea = FileEntry("outputs/model.pt", 1, "ha", True)
    eb = FileEntry("outputs/model.pt", 1, "hb", True)
    verdict = compare_runs(
        Side("a", [ea], lambda e: blobs["a"], [], ""), Side("b", [eb], lambda e: blobs["b"], [], ""), "strict"
    )
    report = verdict.outputs[0].tensors
    assert report is not None and [d.name for d in report.differing] == ["b"]
    assert report.differing[0].max_abs == 0.5


def test_a_torn_file_two_ranks_wrote_is_blamed_on_the_writers_not_unreadable(dirs: tuple[Path, Path]) -> None:
    a, b = dirs
    torch.save(state_dict(), a / "model.pt")
    whole = (a / "model.pt").read_bytes()
    (b / "model.pt").write_bytes(whole[: len(whole) // 2] + whole[: len(whole) // 2])  # interleaved writes
    plain = compare_runs(side(a), side(b), "strict")
    assert plain.reasons[0].code == "output_differs" and "unreadable" in plain.reasons[0].message
    shared = [SharedWrite("model.pt", [0, 1], [41, 42])]
    v = compare_runs(side(a, shared_writes=shared), side(b), "strict")
    (reason,) = v.reasons
    assert reason.code == "concurrent_write" and reason.path == "model.pt"
    assert "written by ranks 0 and 1 at once" in reason.message and "unreadable" not in reason.message
    assert reason.fields["ranks"] == [0, 1] and "unreadable" in reason.fields["detail"]
    assert v.summary.startswith("diverged: output model.pt was written by ranks 0 and 1 at once")


def test_metric_logs_read_leniently_may_hold_values_that_are_no_rows() -> None:
    row = {"name": "loss", "value": 0.5, "step": 0}
    assert compare_metrics([row, 12], [row], Tolerance()) is None  # type: ignore[list-item]
