"""Metric series harvested with no code change: stdout line shapes, metric files, TensorBoard events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.collect import harvest
from repro.collect.harvest import HarvestSettings, RunSources
from repro.errors import ConfigError
from repro.store.record import ResultInfo

NANOGPT_LOG = """\
tokens per iteration will be: 16,384
found vocab_size = 65 (inside data/shakespeare_char/meta.pkl)
Initializing a new model from scratch
number of parameters: 10.65M
num decayed parameter tensors: 26, with 10,740,096 parameters
using fused AdamW: False
step 0: train loss 4.2874, val loss 4.2823
iter 0: loss 4.2655, time 12523.40ms, mfu -100.00%
iter 10: loss 3.2100, time 38.91ms, mfu 24.61%
iter 20: loss 2.7900, time 39.02ms, mfu 24.60%
step 30: train loss 2.0500, val loss 2.1000
saving checkpoint to out-shakespeare-char
iter 30: loss 2.4312, time 41.12ms, mfu 24.20%
"""

HF_LOG = """\
{'loss': 2.3012, 'grad_norm': 1.2345, 'learning_rate': 4.5e-05, 'epoch': 0.5}
{'loss': 1.9876, 'grad_norm': 1.1, 'learning_rate': 4e-05, 'epoch': 1.0}
{'eval_loss': 1.8, 'eval_runtime': 0.1234, 'eval_samples_per_second': 810.2, 'epoch': 1.0}
{'train_runtime': 3.21, 'train_steps_per_second': 3.9, 'train_loss': 2.1, 'epoch': 1.0}
"""


def _by_name(found: list[harvest.Harvested]) -> dict[str, harvest.Harvested]:
    return {s.name: s for s in found}


def test_nanogpt_lines_give_loss_by_iter_and_eval_losses_by_step_without_timings() -> None:
    found = _by_name(harvest.from_stdout(NANOGPT_LOG))
    assert sorted(found) == ["loss", "train_loss", "val_loss"]
    assert found["loss"].points == [(0, 4.2655), (10, 3.21), (20, 2.79), (30, 2.4312)]
    assert found["train_loss"].points == [(0, 4.2874), (30, 2.05)]
    assert found["val_loss"].points == [(0, 4.2823), (30, 2.1)]
    assert {s.source for s in found.values()} == {"stdout"}


def test_epoch_lines_and_progress_bars_redrawn_with_carriage_returns() -> None:
    log = (
        "Epoch 1/3 - loss: 0.6931 - accuracy: 0.5000 - 12ms/step\n"
        "\rEpoch 2:  50%|#####     | 2/4 [00:01<00:01, 1.9it/s, loss=0.9]"
        "\rEpoch 2: 100%|##########| 4/4 [00:02<00:00, 2.0it/s, loss=0.41]\n"
        "| epoch   3 |   2/  4 batches | lr 0.10 | ms/batch  5.21 | loss  0.33 | ppl     1.39\n"
        "epoch=4, train_loss=0.25, elapsed=3.5\n"
    )
    found = _by_name(harvest.from_stdout(log))
    assert found["loss"].points == [(1, 0.6931), (2, 0.41), (3, 0.33)]
    assert found["accuracy"].points == [(1, 0.5)]
    assert found["train_loss"].points == [(4, 0.25)]
    assert "elapsed" not in found and "ms" not in found and "batch" not in found
    assert found["lr"].points == [(3, 0.1)]


def test_hf_printed_dicts_step_by_epoch_and_leave_out_runtime_and_rates() -> None:
    found = _by_name(harvest.from_stdout(HF_LOG))
    assert found["loss"].points == [(0.5, 2.3012), (1, 1.9876)]
    assert found["eval_loss"].points == [(1, 1.8)]
    assert found["train_loss"].points == [(1, 2.1)]
    assert not [n for n in found if "runtime" in n or "per_second" in n or n == "epoch"]


def test_a_project_pattern_names_its_series_and_wins_over_the_built_in_shapes() -> None:
    log = "Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.302585\nTrain Epoch: 1 [640/60000 (1%)]\tLoss: 1.5\n"
    pattern = r"Train Epoch: \d+ \[(?P<step>\d+)/\d+.*Loss: (?P<nll>[\d.]+)"
    found = _by_name(harvest.from_stdout(log, [pattern]))
    assert found["nll"].points == [(0, 2.302585), (640, 1.5)]
    unstepped = _by_name(harvest.from_stdout(log, [r"Loss: (?P<nll>[\d.]+)"]))
    assert unstepped["nll"].points == [(0, 2.302585), (1, 1.5)]


def test_lines_without_a_leading_step_are_not_metrics() -> None:
    log = "number of parameters: 10.65M\nloss 0.5 at the end\nsaving model.pt\nbest val loss 1.2\n"
    assert harvest.from_stdout(log) == []


def _write(root: Path, rel: str, text: str) -> str:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return rel


def test_lightning_metrics_csv_by_step_with_empty_cells_skipped(tmp_path: Path) -> None:
    rel = _write(
        tmp_path,
        "lightning_logs/version_0/metrics.csv",
        "epoch,step,train_loss,val_loss,val_acc,epoch_time\n"
        "0,49,0.693,,,\n0,99,0.512,,,\n0,99,,0.48,0.81,1.2\n1,149,0.40,,,\n",
    )
    found = _by_name(harvest.from_files(tmp_path, [rel]))
    assert sorted(found) == ["train_loss", "val_acc", "val_loss"]
    assert found["train_loss"].points == [(49, 0.693), (99, 0.512), (149, 0.4)]
    assert found["val_loss"].points == [(99, 0.48)]
    assert found["train_loss"].origin == rel and found["train_loss"].source == "files"


def test_hf_trainer_state_log_history_the_fullest_copy_wins(tmp_path: Path) -> None:
    history = [
        {"loss": 2.3, "grad_norm": 1.2, "learning_rate": 4e-5, "epoch": 0.5, "step": 10},
        {"loss": 1.9, "grad_norm": 1.1, "learning_rate": 3e-5, "epoch": 1.0, "step": 20},
        {"eval_loss": 1.8, "eval_runtime": 0.12, "eval_samples_per_second": 800.0, "epoch": 1.0, "step": 20},
        {"train_runtime": 3.2, "train_loss": 2.1, "total_flos": 1234.0, "epoch": 1.0, "step": 20},
    ]
    state = {"best_metric": None, "global_step": 20, "log_history": history, "max_steps": 20}
    full = _write(tmp_path, "out/trainer_state.json", json.dumps(state))
    partial = json.dumps({**state, "log_history": history[:1]})
    early = _write(tmp_path, "out/checkpoint-10/trainer_state.json", partial)
    found = _by_name(harvest.from_files(tmp_path, [early, full]))
    assert found["loss"].points == [(10, 2.3), (20, 1.9)]
    assert found["loss"].origin == full
    assert found["eval_loss"].points == [(20, 1.8)]
    assert not [n for n in found if "runtime" in n or "per_second" in n]


def test_files_without_steps_and_files_that_do_not_parse_give_nothing(tmp_path: Path) -> None:
    rels = [
        _write(tmp_path, "preds.csv", "id,label\n1,0\n2,1\n"),
        _write(tmp_path, "config.json", json.dumps({"lr": 0.1, "layers": [1, 2]})),
        _write(tmp_path, "broken.json", "{not json"),
        _write(tmp_path, "notes.txt", "step,loss\n1,0.5\n"),
    ]
    assert harvest.from_files(tmp_path, rels) == []


def test_a_metric_file_that_is_a_link_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.csv"
    outside.write_text("step,loss\n1,0.5\n")
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "metrics.csv").symlink_to(outside)
    assert harvest.from_files(tmp_path / "proj", ["metrics.csv"]) == []


def test_tensorboard_scalars_every_tag_by_step(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "out"))
    for step in range(0, 30, 10):
        writer.add_scalar("Loss/train", 3.0 - step / 10, step)
        writer.add_scalar("time/step_ms", 38.9, step)
    writer.add_scalar("Loss/test", 2.5, 20)
    writer.close()
    rels = [str(p.relative_to(tmp_path)) for p in (tmp_path / "out").iterdir()]
    found = _by_name(harvest.from_tensorboard(tmp_path, rels))
    assert sorted(found) == ["Loss/test", "Loss/train"]
    assert found["Loss/train"].points == [(0, 3.0), (10, 2.0), (20, 1.0)]
    assert found["Loss/test"].origin == "out" and found["Loss/test"].source == "tensorboard"


def test_logged_names_win_and_the_record_says_where_each_series_came_from(tmp_path: Path) -> None:
    rel = _write(tmp_path, "metrics.csv", "step,loss,acc\n1,0.5,0.7\n2,0.4,0.8\n")
    logged = b'{"name": "loss", "value": 0.45, "step": 1}\n{"name": "loss", "value": 0.35, "step": 2}\n'
    res = ResultInfo()
    blobs: list[bytes] = []

    def put(raw: bytes) -> str:
        blobs.append(raw)
        return "0" * 32

    sources = RunSources(tmp_path, (rel,), "iter 5: loss 9.0, acc 0.1\n", logged)
    harvest.fold(res, sources, HarvestSettings(), put, str.upper)
    assert [(s.name, s.source, s.origin, s.points, s.last_step, s.last) for s in res.series] == [
        ("LOSS", "log_metric", None, 2, 2, 0.35),
        ("ACC", "files", "METRICS.CSV", 2, 2, 0.8),
    ]
    assert res.harvested == "0" * 32
    rows = [json.loads(line) for line in blobs[0].decode().splitlines()]
    assert rows == [{"name": "acc", "step": 1, "value": 0.7}, {"name": "acc", "step": 2, "value": 0.8}]


def test_metrics_from_orders_the_sources_and_an_empty_list_harvests_nothing(tmp_path: Path) -> None:
    rel = _write(tmp_path, "metrics.csv", "step,loss\n1,0.5\n")
    stdout = "iter 1: loss 0.55\n"
    first = harvest.harvest(tmp_path, [rel], stdout, HarvestSettings(("stdout", "files")))
    assert [(s.name, s.source) for s in first] == [("loss", "stdout")]
    assert harvest.harvest(tmp_path, [rel], stdout, HarvestSettings(())) == []


@pytest.mark.parametrize(
    ("sources", "patterns", "message"),
    [
        (("tensorbord",), (), "unknown source 'tensorbord'"),
        ((), ("loss (",), "not a valid regular expression"),
        ((), (r"loss (\d+)",), "names no series"),
    ],
)
def test_bad_settings_are_refused(sources: tuple[str, ...], patterns: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        harvest.check_settings(sources, patterns)


def test_harvested_rows_are_stored_in_step_order_so_the_earliest_divergence_is_met_first() -> None:
    found = harvest.from_stdout(NANOGPT_LOG)  # train_loss and val_loss come first, at steps 0 and 30
    rows = [json.loads(line) for line in harvest.rows_blob(found).decode().splitlines()]
    assert [r["step"] for r in rows] == sorted(r["step"] for r in rows)
    assert [r["name"] for r in rows if r["step"] == 30] == ["train_loss", "val_loss", "loss"]


def test_a_declared_output_dir_the_host_linked_elsewhere_is_read_as_outputs_are(tmp_path: Path) -> None:
    elsewhere = tmp_path / "scratch" / "outputs"
    _write(elsewhere.parent, "outputs/metrics.csv", "step,loss\n1,0.5\n2,0.25\n")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "outputs").symlink_to(elsewhere)
    assert harvest.from_files(project, ["outputs/metrics.csv"]) == []  # not declared: a link the run made
    (found,) = harvest.from_files(project, ["outputs/metrics.csv"], declared=["outputs"])
    assert found.points == [(1, 0.5), (2, 0.25)]


# pytorch/examples time_sequence_prediction: LBFGS prints the loss of every closure call, no step.
TIME_SEQUENCE_LOG = """\
STEP:  0
loss: 0.5023738122475573
loss: 0.4985663937943564
loss: 0.47901196061152023
test loss: 0.3368833920853284
STEP:  1
loss: 0.3368833920853284
loss: 0.3024285568696848
test loss: 0.0123
"""


def test_printed_loss_lines_with_no_step_give_a_curve_by_their_order() -> None:
    found = _by_name(harvest.from_stdout(TIME_SEQUENCE_LOG))
    assert sorted(found) == ["loss", "test_loss"]
    assert [s for s, _ in found["loss"].points] == [0, 1, 2, 3, 4]
    assert found["loss"].points[-1] == (4, 0.3024285568696848)
    assert found["test_loss"].points == [(0, 0.3368833920853284), (1, 0.0123)]
    regression = _by_name(harvest.from_stdout("==> Learned function:\ty = +0.51 x^4 +1.66\nLoss: 0.005274\n"))
    assert regression["loss"].points == [(0, 0.005274)]
    setup = "seed: 42\nepochs: 10\nnumber of parameters: 10.65M\nbest val loss 1.2\n"
    assert harvest.from_stdout(setup) == []  # settings printed once, and loss words in a sentence


def test_two_ranks_writing_one_tensorboard_directory_keep_a_series_each(tmp_path: Path) -> None:
    """DLRM under torchrun: both ranks log "loss" to the same runs/ directory; each rank's scalars
    stay its own series (rank 0 under the plain tag, as logged metrics are named)."""
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    rels = []
    for rank in (0, 1):
        writer = SummaryWriter(str(tmp_path / "runs"), filename_suffix=f".{rank}")
        for step in range(0, 30, 10):
            writer.add_scalar("loss", 1.0 + rank + step / 8, step)  # exact in float32
        writer.close()
        made = [str(p.relative_to(tmp_path)) for p in (tmp_path / "runs").iterdir()]
        rels += [rel for rel in made if rel not in rels]
    writers = {rel: rank for rank, rel in enumerate(rels)}
    found = _by_name(harvest.from_tensorboard(tmp_path, rels, writers=writers))
    assert sorted(found) == ["loss", "loss (rank 1)"]
    assert found["loss"].points == [(0, 1.0), (10, 2.25), (20, 3.5)]
    assert found["loss (rank 1)"].points == [(0, 2.0), (10, 3.25), (20, 4.5)]
