"""Exact mid-epoch resume with no change to the script, for Lightning and Accelerate as their users write
them: a `LightningModule` + `LightningDataModule` with two DataLoader workers, `ModelCheckpoint(
every_n_train_steps=5)` and `trainer.fit(ckpt_path="last")`; a loop in the shape of Accelerate's
`complete_nlp_example.py` (`save_state`, `load_state`, `skip_first_batches`). Each is SIGKILLed (the
process group) right after a random optimizer step that follows a checkpoint — 12 steps an epoch, a
checkpoint every 5, so it always resumes mid-epoch — continued with `repro resume`, and ends
byte-identical to an uninterrupted run: every output, the final weights and optimizer state among them
(`repro check --interrupt`); the negative control, no RNG stream restored, is caught.

Lightning's fit loop takes the rest of a resumed epoch from a new DataLoader iterator (it warns that
the dataloader "is not resumable"): the runtime draws that iterator's order as the interrupted epoch's
and leaves out the batches the loop counts as taken (`runtime/loaderseeds.py`). Lightning's own checkpoint
files are left out of its comparison (`outputs.exclude`): when the resumed epoch is the last one, the
`last.ckpt` written at the end holds another `batch_progress.is_last_batch` flag than the uninterrupted
run's (Lightning's loop bookkeeping, named in the README); the weights and optimizer state in
`outputs/model.pt` are compared byte for byte."""

from __future__ import annotations

import json
from typing import Any

import pytest

from repro.collect.checkpoints import lightning_loops
from tests.conftest import Project

pytestmark = pytest.mark.slow

COMMON = ["--interrupt", "1", "--control", "--json", "--backend", "local", "--seed", "7", "--data", "data",
          "--outputs", "outputs", "--"]  # fmt: skip


def _project(project: Project, script: str, config: str = "") -> None:
    project.script(script, "train.py")
    if config:
        project.write("repro.yaml", config)
    project.points(n=96)
    project.write(".gitignore", "outputs/\ncheckpoints/\n")
    project.commit(script)


def _certified(project: Project, *command: str) -> dict[str, Any]:
    r = project.repro("check", *COMMON, "python", "train.py", *command)
    assert r.code == 0, r.out + r.err
    result: dict[str, Any] = json.loads(r.out)
    assert result["status"] == "identical" and result["kind"] == "interrupt"
    ordinary, spoiled = result["states"]
    assert ordinary["control"] is None and ordinary["ranks"][0]["same"] is True
    assert ordinary["ranks"][0]["steps"] > 0  # the state compared at every step after the resume point
    (control,) = result["controls"]
    assert control["caught"] is True and control["spoiled"] == "rng" and spoiled["control"] == "rng"
    assert control["state"].startswith("rank 0: ")  # the first state that differs, by its path
    return result


def test_a_lightning_fit_killed_mid_epoch_resumes_byte_identical(project: Project) -> None:
    _project(project, "lightning_steps.py", 'outputs:\n  dirs: [outputs]\n  exclude: ["checkpoints/*"]\n')
    result = _certified(project, "--every", "5")
    (verdict,) = result["runs"]
    assert [(o["path"], o["status"]) for o in verdict["outputs"]] == [("outputs/model.pt", "same")]
    # The resumed runs' records say that Lightning's loop counters are its own; exact only when unspoiled
    _, _, resumed, _, spoiled = result["run_ids"]
    for run, exact in ((resumed, True), (spoiled, False)):
        shown = json.loads(project.repro("show", run, "--json").out)
        assert {"code": "resume_lightning_loops", "message": lightning_loops(exact)} in shown["warnings"]


def test_an_accelerate_loop_killed_mid_epoch_resumes_byte_identical(project: Project) -> None:
    _project(project, "accelerate_loop.py")
    result = _certified(project, "--resume_from_checkpoint", "--checkpointing_steps", "5")
    (verdict,) = result["runs"]
    assert "outputs/model.pt" in {o["path"] for o in verdict["outputs"]}
