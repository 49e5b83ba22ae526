"""A docker run SIGKILLed together with its repro process (a preempted node) loses nothing.

The container writes its checkpoints into its copy of the project, which only the end of
the run moved back. Here repro, the command's processes and the container all die after the
first checkpoint; `repro resume` seals the run as interrupted, bringing the copy's files back,
and continues from the checkpoint to the very bytes an uninterrupted docker run ends with.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from repro.backends.docker.engine import LABEL_RUN, engine
from repro.store.hashing import hash_bytes
from repro.store.runs import Store
from tests.conftest import Project
from tests.integration.test_resume_real import _fresh, kill_after_checkpoint, resumable_project

pytestmark = [
    pytest.mark.docker,
    pytest.mark.slow,
]


def _containers(run_id: str) -> list[dict[str, object]]:
    with engine() as client:
        return list(client.api.containers(all=True, filters={"label": f"{LABEL_RUN}={run_id}"}))


def test_a_docker_run_killed_with_repro_resumes_from_its_checkpoint_bit_identical(
    project: Project, tmp_path: Path
) -> None:
    resumable_project(project, "resumable_train.py")
    project.lock_torch()
    project.commit("lock")
    args = ["--backend", "docker", "--seed", "7", "--data", "data",
            "--", "python", "train.py", "--epochs=4", "--epoch-sleep=0.8"]  # fmt: skip
    r = project.repro("run", *args)
    assert r.code == 0, r.err
    reference = _fresh(project)

    killed = kill_after_checkpoint(project, args, within=0.5)
    deadline = time.monotonic() + 30  # the node is gone: so is its container (the reaper removes it)
    while _containers(killed) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _containers(killed) == [], "the container outlived repro"
    tree = project.root / ".repro" / "runs" / killed / "work" / "tree"
    assert (tree / "checkpoints" / "last.pt").is_file() and not (tree / "model.pt").exists()
    assert not (project.root / "checkpoints" / "last.pt").exists()  # only the copy has it, until resumed

    # Exported as it was killed (sealed first, its checkpoints among its outputs), carried elsewhere, and
    # resumed there on docker from the capsule alone: the very bytes of the uninterrupted run.
    capsule = tmp_path / "carried" / "killed.tar"
    r = project.repro("export", killed, "--with-data", "-o", str(capsule))
    assert r.code == 0, r.err
    assert f"run {killed} was never sealed" in r.err
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = project.repro("resume", str(capsule), "--json", cwd=elsewhere)
    assert r.code == 0, r.err
    moved = json.loads(r.out)
    assert moved["resumed_from"] == killed and moved["backend"] == "docker"
    assert "restored its code and" in r.err and "checkpoints/last.pt" in r.err
    assert "=> resuming from checkpoints/last.pt" in r.err and "not exact" not in r.err
    rows = json.loads(project.repro("ls", "--json", cwd=elsewhere).out)["runs"]
    assert [(row["id"], row["kind"], row["parent"]) for row in rows if row["id"] == moved["id"]] == [
        (moved["id"], "resume", killed)
    ]
    resumed = Store(elsewhere).resolve(moved["id"]).record
    assert resumed.resumed_from == killed and resumed.backend.network is False
    assert next(o.hash for o in resumed.results.outputs if o.path == "model.pt") == hash_bytes(reference)
    assert not (elsewhere / "model.pt").exists() and not (elsewhere / "checkpoints").exists()
    r = project.repro("get", moved["id"], "model.pt", "-o", ".", cwd=elsewhere)
    assert r.code == 0, r.err
    assert (elsewhere / "model.pt").read_bytes() == reference

    r = project.repro("resume", killed, "--json")  # and where it was killed, from the project's own files
    assert r.code == 0, r.err
    assert json.loads(r.out)["resumed_from"] == killed
    assert "=> resuming from checkpoints/last.pt" in r.err
    assert "not exact" not in r.err
    assert (project.root / "model.pt").read_bytes() == reference
    assert (project.root / "checkpoints" / "last.pt").stat().st_uid == os.getuid()

    interrupted = json.loads(project.repro("show", killed, "--json").out)
    assert interrupted["results"]["status"] == "interrupted"
    assert "checkpoints/last.pt" in [o["path"] for o in interrupted["results"]["outputs"]]
    assert not (project.root / ".repro" / "runs" / killed / "work").exists()
