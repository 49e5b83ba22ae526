"""Portable capsules: repro installed from its wheel, outside the checkout, runs a training in a
container, exports the capsule with its image, and replays it `identical` after the image, its
base image and the wheelhouse are gone: loaded from the capsule, no build.

The test makes its own base image (the shared base image plus a label of its own, so it has an
id of its own) and removes only what it made. The environment image built on it installs the
quick-start's lock, torch included: an image holds exactly its lock, so torch cannot come from
the base.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import QUICKSTART_LOCK, REPO, Project, _docker_missing

docker = pytest.importorskip("docker")

from repro.backends.docker.engine import engine, find_image  # noqa: E402
from repro.config import DEFAULT_BASE_IMAGE  # noqa: E402

TEST_LABEL = "org.repro.test"


pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def own_base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A base image of this test's own: the default base image plus a unique label (so removing it
    leaves the shared base in place). The image built on it holds exactly its lock."""
    reason = _docker_missing()
    if reason:
        pytest.skip(reason)
    tag = f"repro-test-base:{uuid.uuid4().hex[:12]}"
    dockerfile = f"FROM {DEFAULT_BASE_IMAGE}\nLABEL {TEST_LABEL}=portable-{tag.split(':')[1]}\n"
    with engine(timeout=600) as client:
        client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True,
                            labels={TEST_LABEL: "portable"}, network_mode="none")  # fmt: skip
    try:
        yield tag
    finally:
        _remove([tag])


def _remove(refs: list[str]) -> None:
    with engine() as client:
        for ref in refs:
            try:
                client.api.remove_image(ref, force=True)
            except docker.errors.ImageNotFound:
                pass


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment outside the checkout with repro installed from its built wheel."""
    base = tmp_path_factory.mktemp("wheel")
    dist = base / "dist"
    # Built from a copy of the sources (setuptools leaves build/ behind), with the build backend of
    # the test environment (setuptools is in lockfiles/dev.lock.txt).
    src = base / "src"
    junk = shutil.ignore_patterns(".git", ".venv", ".bench", ".repro", "build", "dist", "*.egg-info",
                                  "__pycache__", "outputs")  # fmt: skip
    shutil.copytree(REPO, src, ignore=junk, symlinks=True)
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    subprocess.run([*build, "-w", str(dist), str(src)], check=True, capture_output=True, cwd=base)
    (wheel,) = dist.glob("repro_capsule-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {"repro/templates/cpu.Dockerfile", "repro/templates/cuda.Dockerfile",
            "repro/runtime/inject/sitecustomize.py"} <= set(names)  # fmt: skip
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    # repro's own dependencies come from the test environment's site-packages (a path line only:
    # its .pth files, the editable checkout among them, are not processed).
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                    "-q", "--no-deps", str(wheel)], check=True, capture_output=True)  # fmt: skip
    return venv


def _repro(venv: Path, *args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    argv = [str(venv / "bin" / "python"), "-m", "repro", *args]
    return subprocess.run(argv, cwd=cwd, text=True, capture_output=True,
                          env={**clean, "NO_COLOR": "1", **env}, timeout=600)  # fmt: skip


def test_a_capsule_with_its_image_replays_identical_with_no_base_image_and_no_wheelhouse(
    own_base: str, wheel_venv: Path, tmp_path: Path
) -> None:
    where = subprocess.run([str(wheel_venv / "bin" / "python"), "-c", "import repro; print(repro.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert where.startswith(str(wheel_venv)), where  # the wheel, not the checkout

    project = Project.init(tmp_path / "proj")
    root = project.root
    project.script("train_ckpt.py", "train.py")
    project.points()
    project.write("requirements.txt", QUICKSTART_LOCK.read_text())  # hash-pinned: used as the lock as it is
    project.write("repro.yaml", f"image:\n  base: {own_base}\ndata: [data]\n")
    project.write(".gitignore", "outputs/\n")
    project.commit("train")
    cache = tmp_path / "cache"
    env = {"REPRO_CACHE_DIR": str(cache)}
    argv = ["--", "python", "train.py", "--epochs", "2", "--save", "outputs/model.pt",
            "--checkpoint-dir", "outputs/checkpoints"]  # fmt: skip
    made: list[str] = []
    try:
        r = _repro(wheel_venv, "run", "--backend", "docker", "--seed", "7", *argv, cwd=root, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        record = json.loads(_repro(wheel_venv, "show", "latest", "--json", cwd=root, env=env).stdout)
        image = record["deps"]["image"]
        made.append(image["tag"])
        assert image["base"] == own_base and not image["reused"]
        assert record["deps"]["freeze"] and record["deps"]["mismatches"] == []  # pip freeze inside = lock
        assert (cache / "wheelhouse").is_dir()

        tar = tmp_path / "run.tar"
        r = _repro(wheel_venv, "export", "latest", "-o", str(tar), "--with-image", cwd=root, env=env)
        assert r.returncode == 0, r.stderr
        assert ", image " in r.stdout  # its size (verify of a carried image: tests/cli/test_export_cli.py)

        _remove([image["tag"], own_base])  # the environment image and its base image
        shutil.rmtree(cache)  # and the wheelhouse
        with engine() as client:
            assert find_image(client, image["id"]) is None
            assert find_image(client, own_base) is None

        elsewhere = tmp_path / "elsewhere"
        shutil.copytree(root / "data", elsewhere / "data")
        r = _repro(wheel_venv, "replay", str(tar), cwd=elsewhere, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.startswith("IDENTICAL"), r.stdout
        assert "loading image" in r.stderr and "building image" not in r.stderr
        replay = json.loads(_repro(wheel_venv, "show", "latest", "--json", cwd=elsewhere, env=env).stdout)
        made.append(replay["deps"]["image"]["tag"])  # loaded under a name of repro's, not the archive's
        assert replay["deps"]["image"]["id"] == image["id"] and replay["deps"]["image"]["loaded"] is True
        assert replay["deps"]["image"]["tag"] == f"repro-env:sha256-{image['id'][7:31]}"
        assert not cache.exists()  # nothing was fetched: no wheelhouse came back
    finally:
        _remove(made)
