"""A resume is a resume only if state came back: nanoGPT's train.py (default `--init_from scratch`) killed
mid-run and resumed starts again from iter 0; repro says so at the end, in the record, and
`check --interrupt` fails with that reason, naming the flag that resumes."""

from __future__ import annotations

import json

import pytest

from repro.store.runs import Store
from tests.conftest import Project
from tests.integration.test_resume_real import kill_after_checkpoint

pytestmark = pytest.mark.slow

TRAIN = ["python", "train.py", "--iter_sleep", "0.05"]


@pytest.fixture
def nanogpt(project: Project) -> Project:
    project.script("nanogpt_resume.py", "train.py")
    project.write(".gitignore", "out/\nmodel.pt\n")
    project.commit("nanogpt")
    return project


def test_a_resume_that_loaded_no_checkpoint_says_it_started_over(nanogpt: Project) -> None:
    kill_after_checkpoint(nanogpt, ["--backend", "local", "--", *TRAIN])
    r = nanogpt.repro("resume", "latest")
    assert r.code == 0, r.out + r.err
    assert "started over" in r.out + r.err and "--init_from=resume" in r.err
    record = Store(nanogpt.root).resolve("latest").record
    assert record.resumed_from and record.results.resume_started_over is True
    assert [w.code for w in record.warnings if w.code == "resume_started_over"] == ["resume_started_over"]
    shown = json.loads(nanogpt.repro("show", "latest", "--json").out)
    assert shown["results"]["resume_started_over"] is True


def test_check_interrupt_fails_when_the_resumed_run_started_over(nanogpt: Project) -> None:
    r = nanogpt.repro("check", "--interrupt", "1", "--backend", "local", "--", *TRAIN)
    assert r.code == 5, r.out + r.err
    assert "loaded no checkpoint: it started over" in r.out
    assert "--init_from=resume" in r.out
