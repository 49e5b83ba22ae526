"""Metric series with no code change, for real: public-shaped scripts run under `repro run`, then
`repro show` lists their loss series with the steps the scripts logged, and where each came from."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow


def _run(project: Project, script: str, *args: str) -> dict[str, Any]:
    project.script(script, "train.py")
    project.commit("train")
    r = project.repro("run", "--backend", "local", "--", "python", "train.py", *args)
    assert r.code == 0, r.err
    show = project.repro("show", "latest")
    assert show.code == 0, show.err
    record = json.loads(project.repro("show", "latest", "--json").out)
    series = {s["name"]: s for s in record["results"]["series"]}
    return {"text": show.out, "series": series}


def _points(project: Project, name: str) -> list[tuple[float, float]]:
    """The harvested points of a series, read back from the run's record through `repro diff`'s reader."""
    from repro.diff import metric_rows, series
    from repro.store.runs import Store

    store = Store(project.root)
    loaded = store.resolve("latest")
    return series(metric_rows(loaded.record, loaded.read_blob))[name]


def test_nanogpt_print_log(project: Project) -> None:
    found = _run(project, "nanogpt_log.py", "--max_iters", "40", "--eval_interval", "20")
    assert set(found["series"]) == {"loss", "train_loss", "val_loss"}  # no time, no mfu
    assert [s for s, _ in _points(project, "loss")] == [0, 10, 20, 30, 40]
    assert [s for s, _ in _points(project, "val_loss")] == [0, 20, 40]
    assert re.search(r"series\s+loss: 5 points, last [\d.]+ at step 40 \(stdout\)", found["text"])


def test_makemore_tensorboard_run(project: Project) -> None:
    pytest.importorskip("tensorboard")
    found = _run(project, "makemore_tb.py", "--max-steps", "30")
    assert found["series"]["Loss/train"]["source"] == "tensorboard"
    assert found["series"]["Loss/train"]["origin"] == "out"
    assert [s for s, _ in _points(project, "Loss/train")] == list(range(30))
    assert [s for s, _ in _points(project, "Loss/test")] == [10, 20]
    # the printed `step N | loss X | step time` lines name `loss`, a name of their own
    assert found["series"]["loss"]["source"] == "stdout"
    assert "step_time" not in found["series"]
    line = r"series\s+Loss/train: 30 points, last [\d.]+ at step 29 \(tensorboard out\)"
    assert re.search(line, found["text"])


def test_lightning_csv_logger_metrics_csv(project: Project) -> None:
    found = _run(project, "lightning_csv.py", "--epochs", "3")
    origin = "lightning_logs/version_0/metrics.csv"
    assert {k: v["origin"] for k, v in found["series"].items()} == {
        "train_loss": origin,
        "val_loss": origin,
        "val_acc": origin,
    }  # epoch_time left out as a timing, epoch and step are the steps
    assert [s for s, _ in _points(project, "train_loss")] == [1, 3, 5, 7, 9, 11, 13, 15, 17]
    assert [s for s, _ in _points(project, "val_loss")] == [5, 11, 17]


def test_hf_trainer_state_and_printed_dicts(project: Project) -> None:
    found = _run(project, "hf_state.py", "--max_steps", "20", "--logging_steps", "5")
    loss = found["series"]["loss"]
    assert (loss["source"], loss["origin"], loss["points"], loss["last_step"]) == (
        "files",
        "results/trainer_state.json",
        4,
        20,
    )  # the full history, not checkpoint-10's, and by step rather than the printed epoch
    assert [s for s, _ in _points(project, "eval_loss")] == [10, 20]
    assert not [n for n in found["series"] if "runtime" in n or "per_second" in n]


NOISY = """\
import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=40)
args = parser.parse_args()
loss = 4.0
for it in range(args.iters + 1):
    if it >= 20:  # from here on, noise no seed controls
        loss -= int.from_bytes(os.urandom(2), "little") / 65536 * 0.01
    loss *= 0.97
    if it % 10 == 0:
        print(f"iter {it}: loss {loss:.4f}, time 38.91ms, mfu 24.61%")
"""


def test_check_compares_harvested_series_step_by_step(project: Project) -> None:
    project.write("train.py", NOISY)
    project.commit("noisy")
    argv = ["--no-compare-stdout", "--json", "--", "python", "train.py"]
    r = project.repro("check", "--backend", "local", *argv)
    assert r.code == 5, r.err
    (verdict,) = json.loads(r.out)["runs"]
    (reason,) = [x for x in verdict["reasons"] if x["code"] == "metric_differs"]
    assert (reason["fields"]["name"], reason["fields"]["step"]) == ("loss", 20)


def test_replay_and_diff_draw_the_curves_and_write_the_page(project: Project, tmp_path: Path) -> None:
    project.write("train.py", NOISY)
    project.commit("noisy")
    assert project.repro("run", "--backend", "local", "--", "python", "train.py").code == 0
    svg, page = tmp_path / "replay.svg", tmp_path / "replay.html"
    r = project.repro("replay", "latest", "--backend", "local", "--plot", str(svg), "--html", str(page))
    assert r.code == 5, r.err
    assert "first divergence: step 20" in svg.read_text()
    assert ">diverged<" in page.read_text() and "first divergence: step 20" in page.read_text()
    diff_page = tmp_path / "diff.html"
    r = project.repro("diff", "latest~1", "latest", "--html", str(diff_page))
    assert r.code == 0, r.err
    text = diff_page.read_text()
    assert "<svg" in text and "loss at step 20" in text


def test_a_plot_of_another_format_is_refused_before_anything_runs(project: Project) -> None:
    project.write("train.py", NOISY)
    project.commit("noisy")
    r = project.repro("check", "--backend", "local", "--plot", "curves.pdf", "--", "python", "train.py")
    assert r.code == 2 and "--plot writes PNG or SVG, not .pdf" in r.err
    assert not (project.root / ".repro").exists() or not list((project.root / ".repro" / "runs").iterdir())


def test_a_check_without_series_keeps_its_verdict_and_warns_about_the_plot(
    project: Project, tmp_path: Path
) -> None:
    project.write("train.py", "print('hello')\n")
    project.commit("no metrics")
    r = project.repro(
        "check", "--backend", "local", "--plot", str(tmp_path / "c.png"), "--", "python", "train.py"
    )
    assert r.code == 0, r.err
    assert "no curves drawn to" in r.err and "neither run recorded a metric series" in r.err


LOG_AND_CSV = """\
import csv
import os

os.makedirs("logs", exist_ok=True)
rows, loss = [], 3.0
for step in range(0, 50, 10):
    loss *= 0.9
    print(f"iter {step}: loss {loss:.4f}, time 12.3ms")
    rows.append({"step": step, "train_loss": loss})
with open("logs/metrics.csv", "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=["step", "train_loss"])
    writer.writeheader()
    writer.writerows(rows)
"""


@pytest.mark.docker
def test_a_docker_run_harvests_its_stdout_and_metric_files(project: Project) -> None:
    project.write("train.py", LOG_AND_CSV)
    project.commit("log and csv")
    r = project.repro("run", "--backend", "docker", "--", "python", "train.py")
    assert r.code == 0, r.err
    record = json.loads(project.repro("show", "latest", "--json").out)
    rows = record["results"]["series"]
    found = {s["name"]: (s["source"], s["origin"], s["points"], s["last_step"]) for s in rows}
    assert found == {"train_loss": ("files", "logs/metrics.csv", 5, 40), "loss": ("stdout", "stdout", 5, 40)}
