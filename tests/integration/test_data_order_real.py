"""Data order: real training replayed, the DataLoader's samples compared batch by batch.

A shuffle seeded from OS entropy replays with other samples from the first batch on: the verdict says
so first (`data_order_differs`, step 0), then the worker seeds; a seeded shuffle replays identical.
`repro diff` ranks the data order as a cause.
"""

from __future__ import annotations

import json

import pytest

from repro.store.runs import Store
from tests.builders import training_project
from tests.conftest import Project

pytestmark = pytest.mark.slow


def _run(project: Project, *args: str) -> None:
    r = project.repro("run", "--backend", "local", "--data", "data", "--",
                      "python", "train.py", *args)  # fmt: skip
    assert r.code == 0, r.err


def test_a_shuffle_from_os_entropy_replays_with_data_order_differs_at_step_0_first(project: Project) -> None:
    training_project(project, "shuffled_train.py")
    _run(project)
    original = Store(project.root).resolve("latest").record.id
    r = project.repro("replay", "latest", "--json")
    assert r.code == 5, r.out + r.err
    verdict = json.loads(r.out)
    first, second = verdict["reasons"][:2]
    assert first["code"] == "data_order_differs", verdict["reasons"]
    assert (first["fields"]["step"], first["fields"]["rank"], first["fields"]["loader"]) == (0, -1, 0)
    assert first["fields"]["kind"] == "indices" and len(first["fields"]["original"]) == 16
    assert sorted(first["fields"]["original"]) != sorted(first["fields"]["replay"]) or (
        first["fields"]["original"] != first["fields"]["replay"]
    )
    assert second["code"] == "worker_seeds_differ" and second["fields"]["epoch"] == 0
    assert verdict["summary"].startswith("diverged: data order differs at DataLoader #1, step 0 (epoch 0)")

    text = project.repro("replay", original)
    assert "data order differs at DataLoader #1, step 0" in text.out, text.out

    diff = project.repro("diff", original, "latest", "--json")  # the original and its last replay
    assert diff.code == 0, diff.err
    causes = json.loads(diff.out)["likely_causes"]
    assert causes[0]["category"] == "data_order", causes
    assert "step 0" in causes[0]["reason"]


def test_a_seeded_shuffle_replays_identical_with_no_data_order_reason(project: Project) -> None:
    training_project(project, "shuffled_train.py")
    _run(project, "--seed", "1234")
    r = project.repro("replay", "latest", "--json")
    assert r.code == 0, r.out + r.err
    verdict = json.loads(r.out)
    assert verdict["status"] == "identical" and verdict["data_order"] is None
    assert not any(x["code"].startswith(("data_order", "worker_seeds")) for x in verdict["reasons"])
