"""Exact resume where people train, on the docker backend: the Hugging Face `Trainer` (`run_clm.py`
shape), Lightning (`ModelCheckpoint(every_n_train_steps=…)`, `trainer.fit(ckpt_path="last")`) and
Accelerate (`save_state`/`load_state`, `skip_first_batches`) scripts of the local tests, each with two
DataLoader workers, killed (SIGKILL of the process group) right after a random optimizer step that
follows a checkpoint, mid-epoch, resumed in a container and compared byte for byte with an
uninterrupted container run (`repro check --interrupt 1 --backend docker`): every output, the final
weights and optimizer state among them, and the whole training state at every step from the resume
point.

One image for the module, holding all three frameworks: built (or reused) once from one hash-pinned
lock, `tests/data/frameworks/` (torch 2.13.0 CPU, transformers, lightning and accelerate at the
versions of the dev lock, compiled by `repro lock`), and reused by every run of every test."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from repro.collect.checkpoints import lightning_loops
from tests.conftest import Project

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FRAMEWORKS = Path(__file__).resolve().parents[1] / "data" / "frameworks"
COMMON = ["--interrupt", "1", "--json", "--backend", "docker", "--seed", "7", "--data", "data",
          "--outputs", "outputs", "--"]  # fmt: skip


def _locked(project: Project) -> None:
    """The frameworks' requirements and their committed lock (the same inputs: never compiled again)."""
    shutil.copyfile(FRAMEWORKS / "requirements.in", project.root / "requirements.in")
    lockfiles = project.root / "lockfiles"
    lockfiles.mkdir(exist_ok=True)
    shutil.copyfile(FRAMEWORKS / "requirements.lock.txt", lockfiles / "requirements.lock.txt")


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tag of the image with transformers, Lightning and Accelerate (built once, else reused)."""
    project = Project.init(tmp_path_factory.mktemp("image") / "proj")
    _locked(project)
    project.commit("lock")
    r = project.repro("build", "--json")
    assert r.code == 0, r.out + r.err
    tag: str = json.loads(r.out)["tag"]
    return tag


def _project(project: Project, script: str, as_name: str, config: str = "") -> None:
    _locked(project)
    project.script(script, as_name)
    if config:
        project.write("repro.yaml", config)
    project.write(".gitignore", "outputs/\ncheckpoints/\n")


def _certified(project: Project, image: str, *command: str) -> dict[str, Any]:
    """`repro check --interrupt 1 --backend docker -- COMMAND`: identical, in the module's image,
    with the state compared at every optimizer step after the resume point."""
    r = project.repro("check", *COMMON, *command)
    assert r.code == 0, r.out + r.err[-6000:]
    assert r.err.count(f"reusing image {image}") == 3, r.err  # uninterrupted, killed, resumed
    assert "· backend docker ·" in r.err and "not exact" not in r.err
    result: dict[str, Any] = json.loads(r.out)
    assert result["status"] == "identical" and result["kind"] == "interrupt"
    assert len(result["run_ids"]) == 3
    (state,) = result["states"]
    assert state["killed_after"] > 0 and state["control"] is None
    (rank,) = state["ranks"]
    assert rank["same"] is True and rank["steps"] > 0, rank
    return result


def _outputs(result: dict[str, Any]) -> dict[str, str]:
    (verdict,) = result["runs"]
    return {o["path"]: o["status"] for o in verdict["outputs"]}


def test_a_trainer_script_killed_mid_epoch_in_a_container_resumes_byte_identical(
    project: Project, image: str
) -> None:
    """One epoch of 27 steps, a checkpoint every 4: the kill always lands inside the epoch."""
    _project(project, "hf_clm.py", "run_clm.py")
    words = "the cat sat on a mat while dog ran far away from home and back again".split()
    r = random.Random(5)
    project.write("data/text.txt", " ".join(r.choice(words) for _ in range(400)))
    project.commit("clm")
    result = _certified(project, image, "python", "run_clm.py", "--augment", "--save_steps", "4",
                        "--num_train_epochs", "1")  # fmt: skip
    outputs = _outputs(result)
    assert outputs["outputs/model/model.safetensors"] == "same"
    assert outputs["outputs/model/optimizer.pt"] == "same"
    assert set(outputs.values()) == {"same"}


def test_a_lightning_fit_killed_mid_epoch_in_a_container_resumes_byte_identical(
    project: Project, image: str
) -> None:
    """Lightning's own checkpoint files are left out: its loop counters may differ, which the resumed
    run's record says (the runtime saw Lightning's fit-loop state loaded in the container)."""
    _project(project, "lightning_steps.py", "train.py",
             'outputs:\n  dirs: [outputs]\n  exclude: ["checkpoints/*"]\n')  # fmt: skip
    project.points(n=96)
    project.commit("lightning")
    result = _certified(project, image, "python", "train.py", "--every", "5")
    assert _outputs(result) == {"outputs/model.pt": "same"}
    shown = json.loads(project.repro("show", result["run_ids"][-1], "--json").out)
    assert {"code": "resume_lightning_loops", "message": lightning_loops(exact=True)} in shown["warnings"]


def test_an_accelerate_loop_killed_mid_epoch_in_a_container_resumes_byte_identical(
    project: Project, image: str
) -> None:
    _project(project, "accelerate_loop.py", "train.py")
    project.points(n=96)
    project.commit("accelerate")
    result = _certified(project, image, "python", "train.py", "--resume_from_checkpoint",
                        "--checkpointing_steps", "5")  # fmt: skip
    outputs = _outputs(result)
    assert outputs["outputs/model.pt"] == "same" and set(outputs.values()) == {"same"}


def test_two_torchrun_ranks_killed_in_a_container_resume_byte_identical(project: Project, image: str) -> None:
    """`torchrun --nproc_per_node=2` (gloo) in one container, a `DistributedSampler` with `set_epoch`,
    per-rank dropout and augmentation: both ranks resume exact, each rank's state the same at every
    step from the resume point."""
    _project(project, "ddp_resumable.py", "train.py")
    project.points(n=128)
    project.commit("ddp")
    r = project.repro("check", *COMMON[:-1], "--nproc-per-node", "2", "--", "python", "train.py",
                      "--epochs", "4", "--save", "outputs/model.pt")  # fmt: skip
    assert r.code == 0, r.out + r.err[-6000:]
    assert r.err.count(f"reusing image {image}") == 3, r.err
    result = json.loads(r.out)
    assert result["status"] == "identical" and len(result["run_ids"]) == 3
    (state,) = result["states"]
    assert state["killed_after"] > 0
    assert [(rank["rank"], rank["same"]) for rank in state["ranks"]] == [(0, True), (1, True)]
    assert _outputs(result)["outputs/model.pt"] == "same"
