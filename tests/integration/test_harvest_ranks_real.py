"""Two torchrun ranks (gloo, CPU) logging one TensorBoard tag into one directory, as DLRM does: each rank's
scalars stay its own series in the record, never one series of two points per step."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow


def test_each_rank_keeps_its_own_tensorboard_series(project: Project) -> None:
    pytest.importorskip("tensorboard")
    project.script("dlrm_tensorboard.py", "dlrm_s_pytorch.py")
    project.points(n=32)
    project.commit("dlrm")
    r = project.repro("run", "--backend", "local", "--nproc-per-node", "2", "--data", "data",
                      "--", "python", "dlrm_s_pytorch.py", "--steps", "5")  # fmt: skip
    assert r.code == 0, r.err
    record = json.loads(project.repro("show", "latest", "--json").out)
    series = {s["name"]: s for s in record["results"]["series"]}
    assert {"loss", "loss (rank 1)"} <= set(series), sorted(series)
    assert series["loss"]["points"] == 5 and series["loss (rank 1)"]["points"] == 5
    assert series["loss"]["last_step"] == series["loss (rank 1)"]["last_step"] == 4
