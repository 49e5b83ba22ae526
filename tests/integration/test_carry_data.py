"""Capsules that carry their data (`repro export --with-data`): a real training script reading a data
folder with DataLoader workers replays `identical` in an empty directory with the data deleted, on the
local and docker backends; host data that differs is used by nobody and left as it was."""

from __future__ import annotations

import json
import random
import shutil
import stat
from pathlib import Path

import pytest

from tests.conftest import Project


def _engine() -> bool:
    try:
        from repro.backends.docker.engine import engine_available

        return engine_available()
    except ImportError:
        return False


def _folder(root: Path, seed: int = 1) -> None:
    """data/train/<class>/<n>.txt: an image-folder-shaped dataset of small text samples."""
    r = random.Random(seed)
    for name, sign in (("cat", 1), ("dog", -1)):
        folder = root / "data" / "train" / name
        folder.mkdir(parents=True)
        for i in range(12):
            (folder / f"{i}.txt").write_text(f"{r.gauss(sign, 0.6):.5f} {r.gauss(-sign, 0.6):.5f}\n")


def _trained(project: Project, backend: str) -> str:
    """A run of the folder training on ``backend``, its data left out of version control; its id."""
    project.script("folder_train.py", "train.py")
    project.write(".gitignore", "outputs/\ndata/\nmodel.pt\ncheckpoints/\n")
    _folder(project.root)
    if backend == "docker":
        project.lock_torch()
    project.commit("train")
    r = project.repro(
        "run", "--backend", backend, "--data", "data", "--", "python", "train.py", "--epochs", "2"
    )
    assert r.code == 0, r.out + r.err
    return str(json.loads(project.repro("show", "latest", "--json").out)["id"])


def _export(project: Project, run_id: str, tar: Path) -> None:
    r = project.repro("export", run_id, "-o", str(tar), "--with-data", "--json")
    assert r.code == 0, r.err
    assert "carrying 24 data files" in r.err  # said before the capsule is written
    assert json.loads(r.out)["data_bytes"] == sum(
        p.stat().st_size for p in (project.root / "data").rglob("*.txt")
    )
    assert project.repro("verify", str(tar)).code == 0


def _replays_identical_in_an_empty_directory(project: Project, tmp_path: Path, backend: str) -> None:
    run_id = _trained(project, backend)
    tar = tmp_path / "run.tar"
    _export(project, run_id, tar)
    shutil.rmtree(project.root / "data")
    shown = project.repro("show", str(tar)).out
    assert "data (24 files): in the capsule (absent here)" in shown
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "in the capsule (absent here)" in project.repro("show", str(tar), cwd=empty).out
    assert list(empty.iterdir()) == []  # looking writes nothing
    r = project.repro("replay", str(tar), "--backend", backend, "--json", cwd=empty)
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
    assert "the host's copy is absent; the replay uses the copy carried in the capsule" in r.err
    assert sorted(p.name for p in empty.iterdir()) == [".repro"]  # nothing placed where the user stands
    # The store of the empty directory now keeps the data by hash: the run id replays from it.
    r = project.repro("replay", run_id, "--backend", backend, "--json", cwd=empty)
    assert r.code == 0 and json.loads(r.out)["status"] == "identical", r.out + r.err
    assert "the copy kept in the store" in r.err


def test_a_capsule_with_its_data_replays_identical_in_an_empty_directory_locally(
    project: Project, tmp_path: Path
) -> None:
    _replays_identical_in_an_empty_directory(project, tmp_path, "local")


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.skipif(not _engine(), reason="no Docker engine answers (make docker-up starts one)")
def test_a_capsule_with_its_data_replays_identical_in_an_empty_directory_in_a_container(
    project: Project, tmp_path: Path
) -> None:
    _replays_identical_in_an_empty_directory(project, tmp_path, "docker")


def test_host_data_that_differs_is_left_alone_and_the_carried_data_is_used(
    project: Project, tmp_path: Path
) -> None:
    run_id = _trained(project, "local")
    tar = tmp_path / "run.tar"
    _export(project, run_id, tar)
    other = tmp_path / "other"
    _folder(other, seed=99)  # the same names, other numbers
    sample = other / "data" / "train" / "cat" / "0.txt"
    before, mode = sample.read_bytes(), stat.S_IMODE(sample.stat().st_mode)
    r = project.repro("replay", str(tar), "--backend", "local", "--max-data-size", "100", cwd=other)
    assert r.code == 2 and "over the limit of 100 bytes" in r.err and "--max-data-size" in r.err
    r = project.repro("replay", str(tar), "--backend", "local", "--json", cwd=other)
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
    assert (
        "declared data data: the host's copy differs; the replay uses the copy carried in the capsule"
        in r.err
    )
    assert sample.read_bytes() == before and stat.S_IMODE(sample.stat().st_mode) == mode
    assert (
        "data (24 files): in the store (the host's copy differs)"
        in project.repro("show", run_id, cwd=other).out
    )


def test_without_carried_data_show_names_the_command_and_replay_stops(
    project: Project, tmp_path: Path
) -> None:
    run_id = _trained(project, "local")
    tar = tmp_path / "plain.tar"
    assert project.repro("export", run_id, "-o", str(tar)).code == 0
    shutil.rmtree(project.root / "data")
    shown = project.repro("show", run_id).out
    assert f"nowhere (absent here, 24 files not kept); run `repro export {run_id} --with-data`" in shown
    empty = tmp_path / "empty"
    empty.mkdir()
    r = project.repro("replay", str(tar), "--backend", "local", cwd=empty)
    assert r.code == 5 and "data/train/cat/0.txt" in r.err  # the drift stop, as before


def test_a_shared_data_remote_keeps_the_blobs_for_another_project(project: Project, tmp_path: Path) -> None:
    remote = tmp_path / "shared" / "repro-data"
    project.write("repro.yaml", f"store:\n  data_remote: {remote}\n")
    run_id = _trained(project, "local")
    _export(project, run_id, tmp_path / "run.tar")
    blobs = [p for p in (remote / "blobs").rglob("*") if p.is_file()]
    assert len(blobs) == 24 and all(not p.stat().st_mode & 0o222 for p in blobs)
    shutil.rmtree(project.root / "data")
    assert "data (24 files): in the data remote" in project.repro("show", run_id).out
    r = project.repro("replay", run_id, "--backend", "local", "--json")
    assert r.code == 0 and json.loads(r.out)["status"] == "identical", r.out + r.err
    assert "the copy in the data remote" in r.err
