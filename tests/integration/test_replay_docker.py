"""Replay inside a container: the capsule's image is rebuilt or reused from its recorded inputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import Project


def _engine() -> bool:
    try:
        from repro.backends.docker.engine import engine_available

        return engine_available()
    except ImportError:
        return False


pytestmark = [
    pytest.mark.docker,
    pytest.mark.slow,
    pytest.mark.skipif(not _engine(), reason="no Docker engine answers (make docker-up starts one)"),
]


def test_unseeded_training_replays_identical_in_a_container(project: Project, tmp_path: Path) -> None:
    project.script("train_unseeded.py", "train.py")
    project.points()
    project.lock_torch()
    project.commit("train")
    argv = ["--", "python", "train.py", "--epochs", "2"]
    r = project.repro("run", "--backend", "docker", "--data", "data", *argv)
    assert r.code == 0, r.err
    original = json.loads(project.repro("show", "latest", "--json").out)
    assert original["backend"]["name"] == "docker" and original["deps"]["image"]["id"]

    r = project.repro("replay", "latest", "--json")
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
    replay = json.loads(project.repro("show", "latest", "--json").out)
    assert replay["backend"]["name"] == "docker" and replay["parent"] == original["id"]
    assert replay["deps"]["image"]["reused"] is True  # same lockfile + base id: no rebuild

    tar = tmp_path / "run.tar"
    assert project.repro("export", original["id"], "-o", str(tar)).code == 0
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "data").mkdir(parents=True)
    shutil.copyfile(project.root / "data" / "points.csv", elsewhere / "data" / "points.csv")
    r = project.repro("replay", str(tar), cwd=elsewhere)
    assert r.code == 0, r.out + r.err
    assert r.out.startswith("IDENTICAL")
