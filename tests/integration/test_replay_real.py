"""`repro replay`: real training re-executed in separate processes, compared byte for byte."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import Project


def _train_project(project: Project) -> None:
    project.script("train_unseeded.py", "train.py")
    project.points()
    project.commit("train")
    r = project.repro(
        "run", "--backend", "local", "--data", "data", "--", "python", "train.py", "--epochs", "2"
    )
    assert r.code == 0, r.err


def test_unseeded_training_replays_identical_in_place_and_from_a_tar_elsewhere(
    project: Project, tmp_path: Path
) -> None:
    _train_project(project)
    r = project.repro("replay", "latest", "--json")
    assert r.code == 0, r.out + r.err
    verdict = json.loads(r.out)
    assert verdict["status"] == "identical"
    rows = json.loads(project.repro("ls", "--json", "--reverse").out)["runs"]
    assert (
        rows[-1]["kind"] == "replay"
        and rows[-1]["parent"] == rows[0]["id"]
        and rows[-1]["verdict"] == "identical"
    )

    tar = tmp_path / "run.tar"
    assert project.repro("export", rows[0]["id"], "-o", str(tar)).code == 0
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "data").mkdir(parents=True)
    shutil.copyfile(project.root / "data" / "points.csv", elsewhere / "data" / "points.csv")
    r = project.repro("replay", str(tar), "--backend", "local", cwd=elsewhere)  # a capsule file: opted in
    assert r.code == 0, r.out + r.err
    assert r.out.startswith("IDENTICAL") and "runs unsandboxed on this machine" in r.err
    assert not (elsewhere / "train.py").exists()  # the code was restored to scratch, not here


def test_entropy_replays_diverged_naming_the_output(project: Project) -> None:
    project.script("entropy.py")
    assert project.repro("run", "--backend", "local", "entropy.py").code == 0
    r = project.repro("replay")
    assert r.code == 5
    assert "DIVERGED" in r.out and "outputs/noise.bin" in r.out


def test_changed_data_stops_the_replay_before_training(project: Project) -> None:
    _train_project(project)
    with open(project.root / "data" / "points.csv", "a") as f:
        f.write("9.0,9.0,1\n")
    (project.root / "data" / "extra.csv").write_text("1,1,1\n")
    r = project.repro("replay")
    assert r.code == 5
    assert "data/points.csv" in r.err and "data/extra.csv" in r.err and "--allow-data-drift" in r.err
    assert len(json.loads(project.repro("ls", "--json", "--reverse").out)["runs"]) == 1  # nothing ran
    r = project.repro("replay", "--allow-data-drift")
    assert r.code == 5 and "data drift" in r.out  # the changed data changes the result, and says why


def test_crashing_capsule_replays_failed(project: Project) -> None:
    project.script("crash.py")
    assert project.repro("run", "--backend", "local", "crash.py").code == 4
    r = project.repro("replay", "--json")
    assert r.code == 4
    assert json.loads(r.out)["status"] == "failed"


def test_the_trace_names_the_first_step_and_parameter_that_diverged(project: Project) -> None:
    project.script("drift_at_step3.py")
    r = project.repro("run", "--backend", "local", "--trace", "drift_at_step3.py")
    assert r.code == 0, r.err
    record = json.loads(project.repro("show", "--json").out)
    assert record["determinism"]["env"]["REPRO_TRACE"] == "1" and "trace" in record["results"]["logs"]
    r = project.repro("replay", "--json")
    assert r.code == 5, r.out + r.err
    verdict = json.loads(r.out)
    assert verdict["trace"]["step"] == 3 and verdict["trace"]["param"] == "2.bias"
    assert verdict["reasons"][0]["code"] == "trace_differs"
    assert verdict["reasons"][0]["message"].startswith("parameter 2.bias first differs at optimizer step 3")
    tensors = verdict["outputs"][0]["tensors"]  # the checkpoint itself, tensor by tensor
    assert "2.bias" in [d["name"] for d in tensors["differing"]] and tensors["max_abs"] > 0
