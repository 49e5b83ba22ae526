"""uv, Poetry and `pip lock` projects run in a container built from their own lockfile: the image
holds exactly what the lockfile pins (numpy at the older version the lock keeps, not the newest
the sources offer), and the run replays identical."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from repro.facts.lockfile import pins
from tests import projectlocks as tools
from tests.conftest import Project

pytestmark = [pytest.mark.docker, pytest.mark.slow]

LOCKFILES = {"uv": "uv.lock", "poetry": "poetry.lock", "pip": "pylock.toml"}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tools.make_projects(tmp_path_factory.mktemp("locked"))


@pytest.mark.parametrize("kind", sorted(LOCKFILES))
def test_the_image_is_the_projects_lock_and_the_run_replays(
    made: dict[str, Path], kind: str, tmp_path: Path
) -> None:
    project = Project.init(tmp_path / kind)
    shutil.copytree(made[kind], project.root, dirs_exist_ok=True)
    project.write(".gitignore", "outputs/\n")
    project.commit("locked")
    r = project.repro("run", "--backend", "docker", "--", "python", "train.py", "--steps", "20", timeout=1500)
    assert r.code == 0, r.err
    assert f"lock: {LOCKFILES[kind]} is the lock" in r.err
    assert f"numpy {tools.NUMPY} tqdm " in r.out  # what ran in the container is the locked numpy
    record = json.loads(project.repro("show", "latest", "--json").out)
    deps = record["deps"]
    assert deps["project_lock"] == LOCKFILES[kind] and deps["image"]["id"]
    locked, ran = pins(deps["requirements"]), pins(deps["freeze"])
    assert locked["numpy"] == tools.NUMPY and "tqdm" in locked
    assert {name: ran.get(name) for name in locked} == locked  # every locked package, at its version
    assert deps["mismatches"] == []  # the image holds exactly the lock, pip and setuptools included

    r = project.repro("replay", "latest", "--json", timeout=1500)
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
