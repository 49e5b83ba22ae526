"""Exact resume where people train: a Hugging Face `Trainer` script in the shape of `run_clm.py` (a 2-layer
GPT-2 from a config, two DataLoader workers augmenting every block, dropout, `save_steps`) and a 2-rank
torchrun script, each SIGKILLed (the process group) right after a random optimizer step that follows a
checkpoint (the Trainer's: 27 steps an epoch, a checkpoint every 4, so it always resumes mid-epoch),
continued with `repro resume`, end byte-identical to an uninterrupted run — every output, the final
weights and optimizer state among them — with no change to the script (`repro check --interrupt`), and
their negative control is caught.

The kill is the runtime's, right after an optimizer step: a SIGKILL from outside may land while the
`Trainer` writes `checkpoint-N/`, and transformers then resumes from that incomplete directory and fails
("Can't find a valid checkpoint") — the framework's own limit, not tested here."""

from __future__ import annotations

import json
import random

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow

ARGS = ["--backend", "local", "--seed", "7", "--data", "data", "--outputs", "outputs",
        "--", "python", "run_clm.py", "--augment", "--save_steps", "4"]  # fmt: skip


def clm_project(project: Project) -> None:
    project.script("hf_clm.py", "run_clm.py")
    words = "the cat sat on a mat while dog ran far away from home and back again".split()
    r = random.Random(5)
    project.write("data/text.txt", " ".join(r.choice(words) for _ in range(400)))
    project.write(".gitignore", "outputs/\ncheckpoints/\n")
    project.commit("clm")


def test_check_interrupt_certifies_the_trainer_script_and_catches_its_control(project: Project) -> None:
    """The control resume ignores every RNG restore, the Trainer's own `rng_state.pth` included."""
    clm_project(project)
    r = project.repro("check", "--interrupt", "1", "--control", "--json", *ARGS)
    assert r.code == 0, r.out + r.err
    result = json.loads(r.out)
    assert result["status"] == "identical" and result["kind"] == "interrupt"
    (control,) = result["controls"]
    assert (
        control["caught"] is True and control["spoiled"] == "rng" and control["run"] == result["run_ids"][-1]
    )
    assert "safetensors" in control["by"]  # an output of the spoiled resume differs: named
    assert control["state"].startswith("rank 0: rng.")  # and the first state that differs, by its path
    ordinary, spoiled = result["states"]
    assert [r["same"] for r in ordinary["ranks"]] == [True] and ordinary["control"] is None
    assert spoiled["control"] == "rng" and spoiled["ranks"][0]["same"] is False


def test_two_torchrun_ranks_pass_check_interrupt_and_catch_their_control(project: Project) -> None:
    """`torchrun --nproc_per_node=2` (gloo), a `DistributedSampler` with `set_epoch`, per-rank dropout and
    augmentation: both ranks resume exact, every rank's state the same from the resume point; both
    controls differ — no stream of either rank restored, and every sampler's epoch reset."""
    project.script("ddp_resumable.py", "train.py")
    project.points(n=128)
    project.write(".gitignore", "outputs/\ncheckpoints/\nmodel.pt\n")
    project.commit("ddp")
    r = project.repro("check", "--interrupt", "1", "--control", "--json", "--backend", "local", "--seed", "7",
                      "--data", "data", "--nproc-per-node", "2", "--", "python", "train.py", "--epochs", "4",
                      "--save", "outputs/model.pt")  # fmt: skip
    assert r.code == 0, r.out + r.err
    result = json.loads(r.out)
    assert result["status"] == "identical" and len(result["run_ids"]) == 7
    rng, sampler = result["controls"]
    assert rng["caught"] is True and "max abs" in rng["by"]  # a tensor of an output, named
    assert rng["spoiled"] == "rng" and ": rng." in rng["state"]
    assert sampler["caught"] is True and sampler["spoiled"] == "sampler"
    assert sampler["state"].startswith("rank 0: sampler.epoch ") and sampler["state"].endswith(" vs 0")
    ordinary = result["states"][0]
    assert [(r["rank"], r["same"]) for r in ordinary["ranks"]] == [(0, True), (1, True)]
