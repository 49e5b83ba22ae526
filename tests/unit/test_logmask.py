"""The timing rule on log lines as real training code prints them, and stdout verdicts through it."""

from __future__ import annotations

import pytest

from repro.compare.logmask import LogMask, is_timing_key, mask_timings
from repro.compare.stdout import compare_stdout
from repro.compare.tolerance import STRICT, Tolerance
from repro.compare.verdict import CompareOptions, Side, compare_runs
from repro.errors import ConfigError
from repro.store.record import FileEntry
from repro.ui.verdict import render_markdown, render_text

# (a line from one run, the same line from another run whose timings differ)
TIMING_PAIRS = [
    # PyTorch examples/word_language_model
    (
        "| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch  7.51 | loss  6.94 | ppl  1032.11",
        "| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch  7.95 | loss  6.94 | ppl  1032.11",
    ),
    (
        "| end of epoch   1 | time: 23.33s | valid loss  5.56 | valid ppl   259.50",
        "| end of epoch   1 | time: 24.10s | valid loss  5.56 | valid ppl   259.50",
    ),
    # nanoGPT
    ("iter 10: loss 2.3456, time 38.91ms, mfu 24.61%", "iter 10: loss 2.3456, time 41.02ms, mfu 23.08%"),
    # minGPT / llm.c style
    (
        "step 20/100 | loss 3.1 | lr 6.0e-04 | norm 1.2 | iter_dt 38.9ms | 13104 tok/s",
        "step 20/100 | loss 3.1 | lr 6.0e-04 | norm 1.2 | iter_dt 51.2ms | 9951 tok/s",
    ),
    # HF Trainer
    (
        "{'loss': 1.23, 'grad_norm': 0.8, 'learning_rate': 5e-05, 'epoch': 1.0}",
        "{'loss': 1.23, 'grad_norm': 0.8, 'learning_rate': 5e-05, 'epoch': 1.0}",
    ),
    (
        "{'train_runtime': 3.2, 'train_samples_per_second': 31.2, 'train_steps_per_second': 3.9, "
        "'train_loss': 1.05, 'epoch': 3.0}",
        "{'train_runtime': 4.71, 'train_samples_per_second': 21.2, 'train_steps_per_second': 2.6, "
        "'train_loss': 1.05, 'epoch': 3.0}",
    ),
    # tqdm bars, with a postfix
    (
        "100%|██████████| 10/10 [00:01<00:00,  15.20it/s, loss=0.123]",
        "100%|██████████| 10/10 [00:02<00:00,   4.87it/s, loss=0.123]",
    ),
    (
        "Epoch 2:  40%|████      | 4/10 [00:12<00:18,  3.05s/it]",
        "Epoch 2:  40%|████      | 4/10 [00:09<00:13,  2.21s/it]",
    ),
    # Lightning's rich and tqdm bars: the bar is as wide as the line has room for beside the rate
    (
        "Epoch 2/2  ━━━━━━━━━━━━━━━━━ 8/8 0:00:00 • 0:00:00 118.75it/s train_loss: 0.024",
        "Epoch 2/2  ━━━━━━━━━━━━━━━━━━ 8/8 0:00:00 • 0:00:00 97.78it/s train_loss: 0.024",
    ),
    (
        "Epoch 0: 100%|█████████▉| 8/8 [00:00<00:00, 135.61it/s, train_loss=0.35]",
        "Epoch 0: 100%|██████████| 8/8 [00:00<00:00, 35.61it/s, train_loss=0.35]",
    ),
    # Keras, Lightning, torchvision references
    (
        "10/10 [==============================] - 1s 52ms/step - loss: 0.6931 - accuracy: 0.5000",
        "10/10 [==============================] - 2s 118ms/step - loss: 0.6931 - accuracy: 0.5000",
    ),
    (
        "Epoch: [0]  [ 10/469]  eta: 0:00:42  lr: 0.100000  img/s: 1083.21  loss: 2.2811 (2.2943)  "
        "time: 0.0912  data: 0.0101  max mem: 120",
        "Epoch: [0]  [ 10/469]  eta: 0:01:02  lr: 0.100000  img/s: 733.95  loss: 2.2811 (2.2943)  "
        "time: 0.1355  data: 0.0101  max mem: 120",
    ),
    ("throughput: 812.5 samples/sec, 0.98 TFLOPS", "throughput: 790.1 samples/sec, 0.95 TFLOPS"),
    ("GPU util 93% | mem 512MiB", "GPU util 88% | mem 512MiB"),
    ("ETA 83s, 1200 tokens/s", "ETA 91s, 1100 tokens/s"),
    ("epoch 3 took 1.5 seconds", "epoch 3 took 2 seconds"),
    # dates and clock times
    ("2024-05-01 10:00:00,123 INFO loss=0.5", "2024-06-11 23:59:58,871 INFO loss=0.5"),
    ("[2024-05-01T10:00:00.123456+00:00] saved checkpoint", "[2026-11-22T17:25:33.000001Z] saved checkpoint"),
    ("Sun Nov 22 17:25:33 2026 started", "Mon Dec 1 09:00:01 2026 started"),
    ("run started 05/01/2024 at 10:00", "run started 11/22/2026 at 17:25"),
    # memory and process ids (YOLO-style columns, torchvision references, psutil, torchrun's glog lines)
    ("Epoch 1/3  GPU_mem 3.21G  box_loss 0.1097", "Epoch 1/3  GPU_mem 3.87G  box_loss 0.1097"),
    ("rss=812MiB loss 0.5", "rss=1.1GiB loss 0.5"),
    ("{'max_memory_allocated': 1.2e9, 'loss': 0.3}", "{'max_memory_allocated': 1.3e9, 'loss': 0.3}"),
    ("DataLoader worker (pid 4242) started", "DataLoader worker (pid 913) started"),
    (
        "W1122 20:21:35.123000 4242 torch/distributed/run.py:793] Setting OMP_NUM_THREADS",
        "W1123 09:02:11.900000 77 torch/distributed/run.py:793] Setting OMP_NUM_THREADS",
    ),
]


@pytest.mark.parametrize(("a", "b"), TIMING_PAIRS)
def test_timings_are_masked_in_every_shape(a: str, b: str) -> None:
    assert mask_timings(a) == mask_timings(b)
    assert compare_stdout(a + "\n", b + "\n", STRICT) is None


# (line, a number in it that is not a timing and must survive the mask)
KEPT = [
    ("| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch  7.51 | loss  6.94 | ppl  1032.11", "6.94"),
    ("| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch  7.51 | loss  6.94 | ppl  1032.11", "1032.11"),
    ("iter 10: loss 2.3456, time 38.91ms, mfu 24.61%", "2.3456"),
    ("{'loss': 1.23, 'train_runtime': 3.2, 'train_samples_per_second': 31.2}", "1.23"),
    ("100%|██████████| 10/10 [00:01<00:00,  15.20it/s, loss=0.123]", "0.123"),
    ("Epoch 2/2  ━━━━━━━━━━━━━━━━━ 8/8 0:00:00 • 0:00:00 118.75it/s train_loss: 0.024", "8/8"),
    ("Epoch: [0]  [ 10/469]  eta: 0:00:42  lr: 0.100000  loss: 2.2811", "2.2811"),
    ("timestep 40 beta1 0.9 update 3", "40"),
    ("timestep 40 beta1 0.9 update 3", "0.9"),
    ("val ms_ssim 0.9132 psnr 31.20", "0.9132"),
    ("grad mean 0.52 min 0.31 max 0.97", "0.52"),
    ("grad mean 0.52 min 0.31 max 0.97", "0.31"),
    ("eta 0.05 lambda 0.1", "0.05"),
    ("Epoch 1/3  GPU_mem 3.21G  box_loss 0.1097", "0.1097"),
    ("model size 12.3MB, 4242 parameters", "12.3MB"),
    ("model size 12.3MB, 4242 parameters", "4242"),
    ("W1122 20:21:35.123000 4242 torch/distributed/run.py:793] loss 0.25", "run.py:793] loss 0.25"),
]


@pytest.mark.parametrize(("line", "number"), KEPT)
def test_numbers_that_do_not_measure_time_are_kept(line: str, number: str) -> None:
    assert number in mask_timings(line)


def test_a_changed_loss_still_diverges_naming_both_values() -> None:
    a = "| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch  7.51 | loss  6.94 | ppl  1032.11\n"
    b = "| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch  7.95 | loss  6.97 | ppl  1032.11\n"
    s = compare_stdout("start\n" + a, "start\n" + b, STRICT)
    assert s is not None and s.line == 2 and not s.within_tolerance
    assert (s.field, s.original_value, s.replay_value) == ("loss", "6.94", "6.97")

    nano_a = "iter 10: loss 2.3456, time 38.91ms, mfu 24.61%\n"
    nano_b = "iter 10: loss 2.3461, time 41.02ms, mfu 23.08%\n"
    entry = FileEntry("model.pt", 1, "same", False)
    v = compare_runs(
        Side("A", [entry], lambda e: None, [], nano_a),
        Side("B", [entry], lambda e: None, [], nano_b),
        "strict",
    )
    assert v.status == "diverged"
    reason = v.reasons[0]
    assert reason.code == "log_differs"
    assert (reason.fields["field"], reason.fields["original_value"], reason.fields["replay_value"]) == (
        "loss",
        "2.3456",
        "2.3461",
    )
    assert "loss 2.3456 -> 2.3461" in reason.message and "line 1" in reason.message
    text = render_text(v, colour=False)
    assert "first value that differs: loss 2.3456 → 2.3461" in text
    assert "| ❌ | stdout | differs | from line 1: loss 2.3456 → 2.3461 |" in render_markdown(v)


def test_hf_metrics_line_diverges_on_the_loss_not_the_runtime() -> None:
    a = "{'loss': 1.23, 'train_runtime': 3.2, 'train_samples_per_second': 31.2}"
    b = "{'loss': 1.31, 'train_runtime': 5.9, 'train_samples_per_second': 17.0}"
    s = compare_stdout(a, b, Tolerance())
    assert s is not None and (s.field, s.original_value, s.replay_value) == ("loss", "1.23", "1.31")


@pytest.mark.parametrize(
    ("name", "timing"),
    [
        ("train_runtime", True),
        ("train_samples_per_second", True),
        ("ms/batch", True),
        ("it/s", True),
        ("s/it", True),
        ("iter_dt", True),
        ("mfu", True),
        ("epoch_time", True),
        ("log_history.3.train_runtime", True),
        ("timestamp", True),
        ("loss", False),
        ("eval_loss", False),
        ("learning_rate", False),
        ("timestep", False),
        ("update", False),
        ("beta1", False),
        ("tokens_per_batch", False),
        ("ms_ssim", False),
        ("step_time_ms", True),
        ("sec/iter", True),
        ("eta", False),
        ("GPU_mem", True),
        ("max_memory_allocated", True),
        ("pid", True),
        ("num_params", False),
    ],
)
def test_field_names_that_measure_time(name: str, timing: bool) -> None:
    assert is_timing_key(name) is timing


def test_project_patterns_mask_and_ignore_lines() -> None:
    a = "wandb: run id 3f9a2c\nworker host-a ready\nloss 0.5\n"
    b = "wandb: run id 77b1e0\nworker host-b ready\nloss 0.5\n"
    assert compare_stdout(a, b, STRICT) is not None
    mask = LogMask(mask=(r"host-\w+",), ignore_lines=(r"^wandb: ",))
    assert compare_stdout(a, b, STRICT, mask) is None
    # line numbers stay those of the text, not of what is left after ignoring
    s = compare_stdout(a + "acc 1\n", b + "acc 2\n", STRICT, mask)
    assert s is not None and s.line == 4


def test_stdout_can_be_left_out_of_the_verdict() -> None:
    entry = FileEntry("model.pt", 1, "same", False)
    a, b = (
        Side("A", [entry], lambda e: None, [], "loss 0.5\n"),
        Side("B", [entry], lambda e: None, [], "loss 0.7\n"),
    )
    assert compare_runs(a, b, "strict").status == "diverged"
    v = compare_runs(a, b, "strict", options=CompareOptions(stdout=False))
    assert v.status == "identical" and v.stdout is None and "stdout not compared" in v.summary


def test_compare_settings_come_from_repro_yaml_and_bad_patterns_are_config_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from repro.config import Layer, Plan, Rank, load

    (tmp_path / "repro.yaml").write_text(
        "compare:\n  stdout: false\n  mask: ['seed=\\d+']\n  ignore_lines: ['^wandb:']\n"
    )
    s = load(tmp_path, environ={})
    assert (s.compare_stdout, s.compare_mask, s.compare_ignore_lines) == (False, (r"seed=\d+",), ("^wandb:",))
    assert CompareOptions.from_settings(s) == CompareOptions(False, (r"seed=\d+",), ("^wandb:",))
    (tmp_path / "repro.yaml").write_text("compare:\n  mask: ['(unclosed']\n")
    with pytest.raises(ConfigError, match="compare.mask"):
        load(tmp_path, environ={})
    (tmp_path / "repro.yaml").write_text("compare:\n  stdout: maybe\n")
    with pytest.raises(ConfigError, match="compare_stdout has a bad value 'maybe'"):
        load(tmp_path, environ={})
    with pytest.raises(ConfigError, match="compare.ignore_lines"):
        Plan((Layer(Rank.FLAG, {"compare_ignore_lines": (("[",), "--test")}),))
