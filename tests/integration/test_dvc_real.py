"""DVC for real: a project whose data DVC tracks (`dvc add data`, pushed to a local remote). The
run records DVC's hash and remote; with the data gone, `repro replay` fetches exactly that version
through DVC and replays identical; with the remote's copy changed, it refuses, naming the file."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from repro.store.runs import Store
from tests.conftest import Project

pytestmark = pytest.mark.slow
pytest.importorskip(
    "dvc", reason="DVC is not installed (pip install 'repro-capsule[dvc]'; the dev lock has it)"
)

DVC = str(Path(sys.executable).with_name("dvc"))
ARGV = ["--", "python", "train.py", "--epochs", "2", "--workers", "2"]


def _dvc(root: Path, *args: str) -> str:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    proc = subprocess.run([DVC, *args], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _shards(project: Project) -> None:
    for i in range(3):
        project.points(f"data/shards/part-{i}.csv", n=48, seed=i)


def _dvc_project(project: Project, remote: Path) -> None:
    """The data under DVC (`dvc add data`), the project's default remote a local folder, pushed."""
    project.script("dvc_train.py", "train.py")
    project.write(".gitignore", "outputs/\nmodel.pt\n")
    _shards(project)
    _dvc(project.root, "init", "-q")
    _dvc(project.root, "config", "core.analytics", "false")
    _dvc(project.root, "remote", "add", "-d", "store", str(remote))
    _dvc(project.root, "add", "-q", "data")
    _dvc(project.root, "push", "-q")
    project.commit("train on data tracked by DVC")


def _lose_the_data(project: Project) -> None:
    """This machine without the data: no working copy and no DVC cache."""
    subprocess.run(
        ["rm", "-rf", str(project.root / "data"), str(project.root / ".dvc" / "cache")], check=True
    )


def _remote_object(remote: Path, data: bytes) -> Path:
    digest = hashlib.md5(data).hexdigest()  # noqa: S324 - DVC's own content address
    return remote / "files" / "md5" / digest[:2] / digest[2:]


def test_replay_fetches_the_recorded_version_through_dvc(project: Project, tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    _dvc_project(project, remote)
    r = project.repro("run", "--backend", "local", "--seed", "1", "--data", "data", *ARGV)
    assert r.code == 0, r.err
    record = Store(project.root).resolve("latest").record
    (item,) = record.data.inputs
    (source,) = item.dvc
    dvc_file = (project.root / "data.dvc").read_text()
    assert source.file == "data.dvc" and source.out == "data" and source.remote == "store"
    assert source.hash_name == "md5" and source.hash_value.endswith(".dir") and source.hash_value in dvc_file
    assert source.nfiles == 3
    shown = json.loads(project.repro("show", "latest", "--json").out)
    assert shown["data"]["inputs"][0]["dvc"][0]["hash_value"] == source.hash_value

    original = (project.root / "data" / "shards" / "part-1.csv").read_bytes()
    _lose_the_data(project)
    r = project.repro("replay", "latest", "--json")
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
    assert "data fetched through DVC from the remote `store`: data" in r.err
    assert not (project.root / "data").exists()  # fetched into the replay's scratch space, not here
    assert list((project.root / ".repro" / "cache").glob("repro-data-*")) == []

    # The data changed since the run (a new version, not pushed): the replay still gets the recorded one.
    changed = project.points("data/shards/part-1.csv", n=48, seed=99).read_bytes()
    r = project.repro("replay", record.id, "--json")
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
    assert os.listdir(project.root / "data" / "shards") == ["part-1.csv"]  # the host's data untouched
    assert (project.root / "data" / "shards" / "part-1.csv").read_bytes() == changed

    # The remote's copy of one file is changed: the replay refuses and names it.
    obj = _remote_object(remote, original)
    assert obj.is_file()
    obj.chmod(0o644)
    obj.write_bytes(original.replace(b"1\n", b"0\n", 1))
    r = project.repro("replay", record.id)
    assert r.code == 5, r.out + r.err
    assert "the data DVC fetched differs from the capsule's record" in r.err
    assert "changed: data/shards/part-1.csv" in r.err and "remote `store`" in r.err
    assert "Traceback" not in r.err


def test_a_remote_this_host_does_not_configure_is_named(project: Project, tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    _dvc_project(project, remote)
    assert project.repro("run", "--backend", "local", "--data", "data", *ARGV).code == 0
    _lose_the_data(project)
    _dvc(project.root, "remote", "rename", "store", "elsewhere")
    r = project.repro("replay", "latest")
    assert r.code == 5, r.out + r.err
    assert "the DVC remote `store`, which this host does not configure" in r.err
    assert "dvc remote add store URL" in r.err and "Traceback" not in r.err

    _dvc(project.root, "remote", "rename", "elsewhere", "store")
    subprocess.run(["rm", "-rf", str(remote)], check=True)  # configured, but never pushed to
    r = project.repro("replay", "latest")
    assert r.code == 5, r.out + r.err
    assert "the DVC remote `store` does not hold the recorded version of data (md5 " in r.err
    assert "WARNING" not in r.err  # DVC's own log lines are not printed
    assert "Traceback" not in r.err


def _engine() -> bool:
    try:
        from repro.backends.docker.engine import engine_available

        return engine_available()
    except ImportError:
        return False


@pytest.mark.docker
@pytest.mark.skipif(not _engine(), reason="no Docker engine answers (make docker-up starts one)")
def test_a_capsule_replays_in_a_clone_without_the_data_in_the_sandbox(
    project: Project, tmp_path: Path
) -> None:
    remote = tmp_path / "remote"
    _dvc_project(project, remote)
    project.lock_torch()
    project.commit("lock")
    r = project.repro("run", "--backend", "docker", "--data", "data", *ARGV)
    assert r.code == 0, r.err
    tar = tmp_path / "run.tar"
    assert project.repro("export", "latest", "-o", str(tar)).code == 0

    # Another machine: a clone of the project (its DVC config names the remote), no data, no DVC cache.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(project.root), str(clone)], check=True)
    assert not (clone / "data").exists()
    r = project.repro("replay", str(tar), "--json", cwd=clone)
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
    assert "data fetched through DVC from the remote `store`: data" in r.err
    assert "docker" in r.err and not (clone / "data").exists()
