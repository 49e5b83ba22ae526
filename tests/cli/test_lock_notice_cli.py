"""`repro run` says once, at the first run that locks for an image, that `lockfiles/` should be
committed (the CI recipe and anyone replaying build from it); once committed, or after it was said,
nothing more. A local run's lock holds this environment's installed versions: it lives in the store
(`.repro/locks/`), and nothing asks to commit it. Real runs in a real git repository with a
declared (empty) requirements file; the image runs on the docker backend."""

from __future__ import annotations

import pytest

from tests.conftest import Project, git

NOTICE = "commit lockfiles/"


def _project(project: Project) -> None:
    project.write("train.py", "print('trained')\n")
    project.write("requirements.in", "")
    project.commit("train")


@pytest.mark.docker
def test_the_image_lock_is_said_once_to_belong_in_the_commit(project: Project) -> None:
    _project(project)
    first = project.repro("run", "--backend", "docker", "--", "python", "train.py")
    assert first.code == 0, first.err
    said = [line for line in first.err.splitlines() if NOTICE in line]
    assert len(said) == 1 and "lockfiles/requirements.lock.txt is not committed" in said[0], first.err
    again = project.repro("run", "--backend", "docker", "--", "python", "train.py")
    assert again.code == 0 and NOTICE not in again.err


def test_a_local_runs_lock_stays_in_the_store_unmentioned(project: Project) -> None:
    _project(project)
    r = project.repro("run", "--backend", "local", "--", "python", "train.py")
    assert r.code == 0 and NOTICE not in r.err and "not committed" not in r.err, r.err
    assert (project.root / ".repro" / "locks" / "requirements-local.lock.txt").is_file()
    assert not (project.root / "lockfiles").exists()
    assert git(project.root, "status", "--porcelain") == ""  # nothing for git to see


@pytest.mark.docker
def test_a_committed_lock_is_not_mentioned(project: Project) -> None:
    _project(project)
    assert project.repro("lock").code == 0
    git(project.root, "add", "lockfiles")
    git(project.root, "commit", "-qm", "lock")
    r = project.repro("run", "--backend", "docker", "--", "python", "train.py")
    assert r.code == 0 and NOTICE not in r.err, r.err
