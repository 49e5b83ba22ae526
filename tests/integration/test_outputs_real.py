"""Outputs are what the run wrote, wherever under the project: scripts in the shape of public
training code, run and replayed for real in separate processes."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.builders import show_json
from tests.conftest import Project

pytestmark = pytest.mark.slow

WORDS = "the cat sat on a mat and the dog ran to the cat while a bird sang on the tree".split()


def _outputs(record: dict[str, Any]) -> dict[str, str]:
    return {o["path"]: o["hash"] for o in record["results"]["outputs"]}


def _setup(p: Project, script: str) -> None:
    p.script(script, "train.py")
    p.points()
    r = random.Random(5)
    p.write("data/corpus.txt", " ".join(r.choice(WORDS) for _ in range(240)) + "\n")
    p.commit("train")


def _line(script: str, text: str) -> int:
    lines = (Path(__file__).parent / "scripts" / script).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_a_model_saved_into_the_working_directory_is_the_output_and_replays_identical(
    project: Project,
) -> None:
    _setup(project, "mnist_main.py")
    r = project.repro(
        "run", "--backend", "local", "--data", "data", "--", "python", "train.py", "--save-model"
    )
    assert r.code == 0, r.err
    record = show_json(project)
    assert list(_outputs(record)) == ["mnist_cnn.pt"]
    assert (project.root / "mnist_cnn.pt").is_file()
    assert record["data"]["undeclared"] == []  # the model it read back for evaluation is its own
    where = f"train.py:{_line('mnist_main.py', 'torch.manual_seed(args.seed)')}"
    assert record["seeds"]["script_seeds"] == [{"api": "torch.manual_seed", "value": 1, "where": where}]
    assert record["determinism"]["applied"] is True

    replay = project.repro("replay", "latest")
    assert replay.code == 0, replay.out + replay.err
    assert "IDENTICAL" in replay.out and "1 output identical" in replay.out


def test_the_same_script_fed_by_os_entropy_replays_diverged_naming_file_and_tensor(project: Project) -> None:
    _setup(project, "mnist_main.py")
    argv = ["--", "python", "train.py", "--save-model", "--seed", "-1", "--epochs", "1"]
    r = project.repro("run", "--backend", "local", "--data", "data", *argv)
    assert r.code == 0, r.err
    (seed,) = show_json(project)["seeds"]["script_seeds"]
    assert seed["api"] == "torch.manual_seed" and seed["value"] != 1

    replay = project.repro("replay", "latest")
    assert replay.code == 5, replay.out + replay.err
    assert "DIVERGED" in replay.out and "mnist_cnn.pt" in replay.out
    assert "fc1.weight" in replay.out or "fc2.weight" in replay.out


def test_progress_bars_checkpoints_and_tensorboard_events_are_outputs_and_replay_identical(
    project: Project,
) -> None:
    _setup(project, "tb_ckpt.py")
    project.write("repro.yaml", "outputs:\n  dirs: [outputs]\n  exclude: ['*.tmp']\n")
    project.commit("config")
    argv = ["--", "python", "train.py", "--epochs", "2"]
    assert project.repro("run", "--backend", "local", "--data", "data", *argv).code == 0
    first = show_json(project)
    outputs = _outputs(first)
    assert {"final.pt", "out/ckpt_epoch0.pt", "out/ckpt_epoch1.pt"} <= set(outputs)
    (events,) = [p for p in outputs if p.startswith("runs/exp/events.out.tfevents.")]
    assert len(outputs) == 4  # no temporary checkpoint, no bytecode
    seeds = first["seeds"]["script_seeds"]
    assert [s["api"] for s in seeds] == ["random.seed", "numpy.random.seed", "torch.manual_seed"]
    assert {s["value"] for s in seeds} == {1337}

    replay = project.repro("replay", "latest")  # timing text masked, events compared by tag and step
    assert replay.code == 0 and "IDENTICAL" in replay.out, replay.out + replay.err
    replayed = _outputs(show_json(project))
    weights = {k: v for k, v in outputs.items() if not k.startswith("runs/")}
    assert {k: replayed.get(k) for k in weights} == weights
    assert any(k.startswith("runs/exp/events.out.tfevents.") for k in replayed)


def test_a_model_saved_with_open_wb_and_reloaded_is_the_output_and_replays_identical(
    project: Project,
) -> None:
    _setup(project, "word_lm.py")
    argv = ["--", "python", "train.py", "--epochs", "1", "--save", "model.pt"]
    r = project.repro("run", "--backend", "local", "--data", "data", *argv)
    assert r.code == 0, r.err
    assert "ms/batch" in r.out  # the script's stdout is repro's
    first = show_json(project)
    assert list(_outputs(first)) == ["model.pt"]
    assert first["data"]["undeclared"] == []
    replay = project.repro("replay", "latest")  # `ms/batch` timings differ and are masked
    assert replay.code == 0 and "IDENTICAL" in replay.out, replay.out + replay.err
    assert _outputs(show_json(project)) == _outputs(first)


CONCURRENT = """\
import argparse, os, time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--tag", required=True)
args = parser.parse_args()
Path("outputs").mkdir(exist_ok=True)
time.sleep(0.5)  # every run is under way before any finishes
Path(f"outputs/result-{args.tag}.txt").write_text(f"result {args.tag}\\n")
with open(f"model-{args.tag}.bin", "wb") as f:
    f.write(args.tag.encode() * 64)
time.sleep(0.5)
print("done", args.tag)
"""


def test_eight_concurrent_runs_each_record_only_their_own_outputs_and_replay_identical(
    project: Project,
) -> None:
    project.write("job.py", CONCURRENT)
    project.commit("job")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "repro",
                "run",
                "--backend",
                "local",
                "--json",
                "--",
                "python",
                "job.py",
                "--tag",
                str(i),
            ],
            cwd=project.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for i in range(8)
    ]
    ids = {}
    for i, proc in enumerate(procs):
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        ids[i] = json.loads(out)["id"]
    for i, run_id in ids.items():
        record = show_json(project, run_id)
        assert sorted(_outputs(record)) == [f"model-{i}.bin", f"outputs/result-{i}.txt"], i
        replay = project.repro("replay", run_id)
        assert replay.code == 0 and "IDENTICAL" in replay.out, replay.out + replay.err


def test_checkpoints_fed_by_os_entropy_replay_diverged_naming_the_weights(project: Project) -> None:
    _setup(project, "tb_ckpt.py")
    argv = ["--", "python", "train.py", "--epochs", "1", "--entropy", "--workers", "0"]
    assert project.repro("run", "--backend", "local", "--data", "data", *argv).code == 0
    replay = project.repro("replay", "latest")
    assert replay.code == 5, replay.out + replay.err
    assert "DIVERGED" in replay.out and "final.pt" in replay.out and "0.weight" in replay.out
