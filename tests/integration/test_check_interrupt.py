"""`repro check --interrupt N`: real runs SIGKILLed after a checkpoint, resumed, certified or blamed."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Project
from tests.integration.test_resume_real import resumable_project

pytestmark = pytest.mark.slow

COMMAND = ["--backend", "local", "--seed", "7", "--data", "data", "--outputs", "outputs",
           "--", "python", "train.py", "--epochs", "2", "--save", "outputs/model.pt"]  # fmt: skip


def test_a_resumable_script_passes_two_interrupts(project: Project) -> None:
    resumable_project(project, "resumable_train.py")
    r = project.repro("check", "--interrupt", "2", "--json", *COMMAND)
    assert r.code == 0, r.out + r.err
    result = json.loads(r.out)
    assert result["status"] == "identical" and result["kind"] == "interrupt" and result["causes"] == []
    assert len(result["runs"]) == 2 and len(result["run_ids"]) == 5  # 1 uninterrupted, 2 × (killed, resumed)
    assert "is killed after optimizer step" in r.err
    assert not (project.root / "checkpoints").exists()  # every run executed in a scratch copy
    rows = json.loads(project.repro("ls", "--json", "--reverse").out)["runs"]
    killed = [row for row in rows if row["kind"] == "check" and row["status"] == "failed"]
    resumed = [row for row in rows if row["kind"] == "resume"]
    assert len(killed) == 2 and [row["parent"] for row in resumed] == [row["id"] for row in killed]


def test_a_script_that_forgets_its_scheduler_fails_naming_it(project: Project) -> None:
    resumable_project(project, "resumable_train.py")
    r = project.repro("check", "--interrupt", "2", *COMMAND, "--skip-scheduler-state")
    assert r.code == 5, r.out + r.err
    assert "not restored: rank 0: scheduler last_epoch " in r.out
    assert "the learning-rate scheduler state was not restored" in r.out
    differ = r.out.split("outputs that differ: ", 1)[1].splitlines()[0]
    assert "outputs/model.pt" in differ.split(", ")


@pytest.mark.docker
def test_a_run_killed_in_a_container_resumes_identical_there(project: Project) -> None:
    resumable_project(project, "resumable_train.py")
    project.lock_torch()
    project.commit("locked")
    docker = ["--backend", "docker", *COMMAND[2:]]
    r = project.repro("check", "--interrupt", "1", "--json", *docker)
    assert r.code == 0, r.out + r.err
    result = json.loads(r.out)
    assert result["status"] == "identical" and len(result["run_ids"]) == 3
    shown = [json.loads(project.repro("show", rid, "--json").out) for rid in result["run_ids"]]
    assert [s["backend"]["name"] for s in shown] == ["docker"] * 3
    assert shown[1]["results"]["exit_code"] == 137  # SIGKILLed inside its container
    assert shown[2]["resumed_from"] == shown[1]["id"]


def test_a_control_that_no_output_notices_fails_the_check(project: Project) -> None:
    """Nothing random after initialisation: a resume with no RNG state restored ends identical, so this
    check could not see a broken resume — it says so and fails (exit 5, control_not_caught)."""
    project.script("fullbatch_resume.py", "train.py")
    project.write(".gitignore", "outputs/\ncheckpoints/\n")
    project.commit("train")
    args = ["--backend", "local", "--seed", "7", "--outputs", "outputs", "--", "python", "train.py"]
    r = project.repro("check", "--interrupt", "1", "--control", "--json", *args)
    assert r.code == 5, r.out + r.err
    result = json.loads(r.out)
    assert result["status"] == "diverged" and len(result["runs"]) == 2  # the resume, then the control
    assert result["runs"][0]["status"] == "identical"
    (control,) = result["controls"]
    assert control["caught"] is False and control["spoiled"] == "rng"
    reason = result["runs"][1]["reasons"][0]
    assert reason["code"] == "control_not_caught"
    assert "this check cannot detect a broken resume in this script" in reason["message"]
    assert len(result["run_ids"]) == 5  # uninterrupted, killed, resumed, killed, spoiled resume
