"""`store.max_bytes` on real traced runs: older checkpoint copies go, each run's latest stays."""

from __future__ import annotations

import json

import pytest

from repro.store.runs import Store
from tests.conftest import Project
from tests.integration.test_resume_real import resumable_project

pytestmark = pytest.mark.slow


def test_a_budget_keeps_only_the_latest_checkpoint_copy_of_each_traced_run(
    project: Project,
) -> None:
    resumable_project(project, "resumable_train.py")
    project.write("repro.yaml", "store:\n  max_bytes: 1\n")  # nothing fits: only what always stays
    project.commit("a store budget")
    said = ""
    for _ in range(2):
        for old in (project.root / "checkpoints").glob("*"):
            old.unlink()  # a fresh training each time, not a resume of the last one
        r = project.repro("run", "--trace", "--backend", "local", "--seed", "7", "--data", "data",
                          "--", "python", "train.py", "--epochs=3")  # fmt: skip
        assert r.code == 0, r.err
        said += r.err
    assert "store.max_bytes: removed" in said, said
    ids = Store(project.root).run_ids()  # oldest first
    assert len(ids) == 2
    for run_id in ids:
        record = json.loads(project.repro("show", run_id, "--json").out)
        kept = [c["blob"] is not None for c in record["results"]["checkpoints"]]
        assert kept[-1] and not any(kept[:-1]), kept  # the latest copy of each run only
    first = ids[0]
    r = project.repro("replay", first, "--from", "step:4", "--steps", "2")  # its copy went
    assert r.code == 2 and "were not kept in the store" in r.err and "store.max_bytes" in r.err, r.err
    assert "Traceback" not in r.err
    gc = project.repro("gc")
    assert gc.code == 0 and "freed" not in gc.out  # already within what the budget can do
