"""A project whose command runs from a subfolder with its own requirements: those are the run's lock."""

from __future__ import annotations

import json
from importlib import metadata

from tests.conftest import Project


def test_a_run_from_a_subfolder_locks_that_folders_requirements(project: Project) -> None:
    version = metadata.version("packaging")
    pinned = f"packaging=={version} \\\n    --hash=sha256:{'0' * 64}\n"  # hash-pinned: the lock as it is
    project.write("experiments/cls/requirements.txt", pinned)
    project.write("experiments/cls/train.py", "import packaging\nprint('trained')\n")
    project.commit("an experiment with its own requirements")
    r = project.repro(
        "run", "--backend", "local", "--", "python", "train.py", cwd=project.root / "experiments/cls"
    )
    assert r.code == 0, r.err
    assert "dependencies: experiments/cls/requirements.txt" in r.err
    record = json.loads(project.repro("show", "latest", "--json").out)
    assert record["deps"]["lockfile"] == "experiments/cls/requirements.txt"
    assert record["deps"]["requirements"] == [f"packaging=={version}"]
    assert not any(w["code"] == "not_locked" for w in record["warnings"])
