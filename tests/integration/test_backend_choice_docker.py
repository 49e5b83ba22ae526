"""`--backend auto` where an engine answers but holds no base image (a fresh CI runner): the run goes
to the local backend and says why in one line; `--backend docker` stops with exit 3 and the way out."""

from __future__ import annotations

import json
import secrets

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.docker

SCRIPT = "import torch\ntorch.manual_seed(0)\ntorch.save(torch.randn(3), 'weights.pt')\nprint('saved')\n"


def test_auto_without_the_base_image_runs_locally_and_docker_says_how_to_make_it(project: Project) -> None:
    project.write("train.py", SCRIPT)
    project.lock_torch()  # declared dependencies: auto would build an image from them
    project.commit("train")
    env = {"REPRO_BASE_IMAGE": f"repro-base:absent-{secrets.token_hex(4)}"}

    r = project.repro("run", "--", "python", "train.py", env=env)
    assert r.code == 0, r.err
    line = f"backend auto → local: the Docker engine has no base image {env['REPRO_BASE_IMAGE']}"
    assert line in r.err and "`repro base-image` makes one" in r.err
    shown = project.repro("show", "latest", "--json")
    assert json.loads(shown.out)["backend"]["name"] == "local"

    r = project.repro("run", "--backend", "docker", "--", "python", "train.py", env=env)
    assert r.code == 3, r.err
    assert f"no base image {env['REPRO_BASE_IMAGE']}" in r.err and "base-image` (Debian packages" in r.err
    assert "Traceback" not in r.err

    r = project.repro("run", "--", "python", "train.py")  # the engine's own base image: docker
    assert r.code == 0, r.err
    assert json.loads(project.repro("show", "latest", "--json").out)["backend"]["name"] == "docker"
