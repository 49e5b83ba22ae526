"""`repro run` says once, at the first run that locks, that `lockfiles/` should be committed (the CI
recipe and anyone replaying build from it); once committed, or after it was said, nothing more.
Real runs in a real git repository with a declared (empty) requirements file, local backend."""

from __future__ import annotations

from tests.conftest import Project, git

NOTICE = "commit lockfiles/"


def test_the_lock_is_said_once_to_belong_in_the_commit(project: Project) -> None:
    project.write("train.py", "print('trained')\n")
    project.write("requirements.in", "")
    project.commit("train")
    first = project.repro("run", "--backend", "local", "--", "python", "train.py")
    assert first.code == 0, first.err
    said = [line for line in first.err.splitlines() if NOTICE in line]
    assert len(said) == 1 and "lockfiles/requirements.lock.txt is not committed" in said[0], first.err
    again = project.repro("run", "--backend", "local", "--", "python", "train.py")
    assert again.code == 0 and NOTICE not in again.err


def test_a_committed_lock_is_not_mentioned(project: Project) -> None:
    project.write("train.py", "print('trained')\n")
    project.write("requirements.in", "")
    project.commit("train")
    assert project.repro("lock").code == 0
    git(project.root, "add", "lockfiles")
    git(project.root, "commit", "-qm", "lock")
    r = project.repro("run", "--backend", "local", "--", "python", "train.py")
    assert r.code == 0 and NOTICE not in r.err, r.err
