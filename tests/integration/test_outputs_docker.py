"""In a container the command writes where it would locally: a model saved into its working
directory comes back into the project, is the run's output, and replays identical."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Project

pytestmark = [
    pytest.mark.docker,
    pytest.mark.slow,
]


def test_a_model_saved_into_the_working_directory_in_a_container(project: Project) -> None:
    project.script("mnist_main.py", "train.py")
    project.points()
    project.lock_torch()
    project.write("notes/keep.txt", "tracked, never written\n")
    project.commit("train")
    argv = ["--", "python", "train.py", "--save-model", "--epochs", "1"]
    r = project.repro("run", "--backend", "docker", "--data", "data", *argv)
    assert r.code == 0, r.err
    record = json.loads(project.repro("show", "latest", "--json").out)
    assert record["backend"]["name"] == "docker"
    assert [o["path"] for o in record["results"]["outputs"]] == ["mnist_cnn.pt"]
    assert record["determinism"]["applied"] is True
    assert record["data"]["undeclared"] == []
    assert record["seeds"]["script_seeds"][0]["api"] == "torch.manual_seed"
    assert (project.root / "mnist_cnn.pt").is_file()  # moved back from the container's copy
    assert not list((project.root / ".repro" / "runs").glob("*/work"))  # the copy is gone

    r = project.repro("replay", "latest", "--json")
    assert r.code == 0, r.out + r.err
    verdict = json.loads(r.out)
    assert verdict["status"] == "identical"
