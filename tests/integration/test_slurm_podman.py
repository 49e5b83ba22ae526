"""Slurm jobs whose ranks run in the run's image with rootless Podman on each node (`--node-env podman`),
on the local two-node cluster, submitted by the unprivileged user `scripts/podman-up.sh` makes: the image
travels to the nodes as an archive in the store and is loaded once into each node's own storage. One real
2-node job, its replay on Slurm, and the replay of its capsule from elsewhere, which goes through the
container too.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from repro.backends.slurm.images import NODE_IMAGES
from tests.conftest import REPO
from tests.integration.test_podman import USER, Rootless, _as_user, _foreign_owned
from tests.integration.test_podman import rootless as rootless  # noqa: F401 - the fixture
from tests.integration.test_slurm import nodes as nodes  # noqa: F401 - the fixture: skips where no cluster

pytestmark = [pytest.mark.podman, pytest.mark.slurm, pytest.mark.slow]

TRAIN = ["--", "python", "slurm_train.py", "--save", "outputs/model.pt", "--epochs", "2"]


@pytest.fixture(scope="module")
def job(rootless: Rootless, nodes: list[str]) -> Iterator[tuple[Rootless, dict[str, Any]]]:  # noqa: F811
    if len(nodes) < 2:
        pytest.skip("the cluster has fewer than two nodes")
    shutil.copyfile(REPO / "recipes" / "slurm" / "train.py", rootless.root / "slurm_train.py")
    (rootless.root / ".gitignore").write_text("outputs/\ncheckpoints/\n")
    for name in ("slurm_train.py", ".gitignore"):
        os.chown(rootless.root / name, pwd.getpwnam(USER).pw_uid, -1)
    commit = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", "slurm"]
    for argv in (["git", "add", "-A"], commit):
        assert _as_user(*argv, cwd=rootless.root).code == 0
    r = rootless.repro("run", "--backend", "slurm", "--node-env", "podman", "--nodes", "2", "--data", "data",
                       *TRAIN)  # fmt: skip
    assert r.code == 0, r.out + r.err
    assert "--node-env podman: each node runs the ranks in the run's image, on the host's network" in r.err
    yield rootless, rootless.record()


def test_a_two_node_job_runs_each_rank_in_rootless_podman(job: tuple[Rootless, dict[str, Any]]) -> None:
    rootless, record = job
    details = record["backend"]["details"]
    slurm = details["slurm"]
    assert slurm["state"] == "COMPLETED" and slurm["options"]["environment"] == "podman"
    assert details["network"] == "host" and record["env"]["world_size"] == 2
    assert slurm["rank_nodes"] == {"0": slurm["nodes"][0], "1": slurm["nodes"][1]}
    freeze = record["deps"]["freeze"]  # measured in the image: the lock's packages, not this venv's
    assert any(p.startswith("torch==") for p in freeze) and not any(p.startswith("pytest==") for p in freeze)
    image = record["deps"]["image"]["id"]
    assert (rootless.root / ".repro" / "node-images" / f"{image.removeprefix('sha256:')}.tar").is_file()
    for node in slurm["nodes"]:  # each node's own storage holds the image now
        storage = f"/tmp/repro-podman-{pwd.getpwnam(USER).pw_uid}/{node}"
        podman = ["podman", f"--root={storage}/root", f"--runroot={storage}/run"]
        exists = _as_user(*podman, "image", "exists", image)
        assert exists.code == 0, exists.err
    assert _foreign_owned(rootless.root) == []  # keep-id on the nodes too


def test_its_replay_on_slurm_reuses_each_nodes_image_and_is_identical(
    job: tuple[Rootless, dict[str, Any]],
) -> None:
    rootless, record = job
    r = rootless.repro("replay", str(record["id"]), "--json")
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
    slurm: dict[str, Any] = rootless.record()["backend"]["details"]["slurm"]  # type: ignore[index]
    assert slurm["options"]["environment"] == "podman" and len(slurm["nodes"]) == 2
    assert [facts["image_loaded"] for facts in slurm["node_hardware"].values()] == [False, False]


def test_its_capsule_from_elsewhere_replays_on_slurm_in_the_container(
    job: tuple[Rootless, dict[str, Any]],
) -> None:
    rootless, record = job
    tar = rootless.root.parent / "slurm-run.tar"
    assert rootless.repro("export", str(record["id"]), "-o", str(tar)).code == 0
    elsewhere = rootless.root.parent / "slurm-elsewhere"
    assert _as_user("mkdir", "-p", str(elsewhere / "data")).code == 0
    assert _as_user("cp", str(rootless.root / "data" / "points.csv"), str(elsewhere / "data")).code == 0
    # The nodes' archive of the image, as the first job saved it (that test checks the save): the same
    # file in this store, so the module saves the image once (this replay would save the same bytes).
    image = str(record["deps"]["image"]["id"]).removeprefix("sha256:")
    saved = rootless.root / ".repro" / NODE_IMAGES / f"{image}.tar"
    assert _as_user("mkdir", "-p", str(elsewhere / ".repro" / NODE_IMAGES)).code == 0
    os.link(saved, elsewhere / ".repro" / NODE_IMAGES / saved.name)
    there = Rootless(elsewhere, rootless.python, rootless.env)
    r = there.repro("replay", str(tar), "--backend", "slurm")
    assert r.code == 0, r.out + r.err
    assert "--backend slurm: this run from elsewhere runs in the container sandbox (podman)" in r.err
    assert r.out.startswith("IDENTICAL") and "unsandboxed" not in r.err
    assert "saved the image for the nodes" not in r.err  # the archive of that id, kept, is reused
    replay: dict[str, Any] = there.record()["backend"]["details"]  # type: ignore[index]
    assert replay["slurm"]["options"]["environment"] == "podman" and replay["network"] == "host"
