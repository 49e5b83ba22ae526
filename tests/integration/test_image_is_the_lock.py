"""The image holds exactly the lock: a lock that pins the venv's own tools (pip, setuptools, wheel) at
versions other than the ones `python -m venv` ships gets those versions alone, metadata and files, and
an image that is not its lock fails the build with one line naming each difference.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from repro.backends import imagecheck
from repro.backends.base import BuiltImage
from repro.backends.docker.build import VENV_PYTHON, check_installed, ensure_image
from repro.backends.docker.engine import engine, engine_available, find_image, has_image
from repro.config import DEFAULT_BASE_IMAGE
from repro.errors import BuildError

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Versions other than bookworm's venv (pip 23.0.1, setuptools 66.1.1, no wheel), all from the index.
TOOLS = {"pip": "26.2.1", "setuptools": "80.9.0", "wheel": "0.46.3"}

# Every file of each package directory, against the RECORD of the one dist-info that claims it.
FILES = textwrap.dedent("""
    import csv, json, os, sys
    site = next(p for p in sys.path if p.endswith("site-packages"))
    out = {}
    for entry in sorted(os.listdir(site)):
        if entry.endswith(".dist-info"):
            with open(os.path.join(site, entry, "RECORD")) as f:
                listed = {row[0] for row in csv.reader(f) if row}
            out[entry] = listed
    files = {}
    for top in ("pip", "setuptools", "wheel", "pkg_resources", "_distutils_hack"):
        for root, dirs, names in os.walk(os.path.join(site, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            files.update({os.path.relpath(os.path.join(root, n), site): True for n in names})
    print(json.dumps({"records": {k: sorted(v) for k, v in out.items()}, "files": sorted(files)}))
""")


TOOLS_LOCK = "".join(f"{k}=={v} \\\n    --hash=sha256:{'0' * 64}\n" for k, v in TOOLS.items())


def _lock(tmp: Path, pins: dict[str, str]) -> Path:
    """A hash-pinned lock of ``pins``, the files fetched with this machine's pip configuration."""
    dest = tmp / "dl"
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q"]
    argv += ["-d", str(dest), *(f"{k}=={v}" for k, v in pins.items())]
    if subprocess.run(argv, capture_output=True).returncode != 0:
        pytest.skip(f"the package sources hold no wheels of {pins}")
    lines = []
    for name, version in sorted(pins.items()):
        wheel = next(dest.glob(f"{name}-{version}-*.whl"))
        lines.append(
            f"{name}=={version} \\\n    --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}"
        )
    path = tmp / "requirements.lock"
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(image: str, code: str) -> str:
    argv = ["docker", "run", "--rm", "--network", "none", "--entrypoint", VENV_PYTHON, image, "-I",
            "-c", code]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def ready() -> None:
    if not engine_available() or not has_image(DEFAULT_BASE_IMAGE):
        pytest.skip(f"no Docker engine, or no base image {DEFAULT_BASE_IMAGE} (`bash scripts/docker-up.sh`)")


@pytest.fixture(scope="module")
def tools_image(ready: None, tmp_path_factory: pytest.TempPathFactory) -> BuiltImage:
    lock = _lock(tmp_path_factory.mktemp("tools-lock"), TOOLS)
    with engine(timeout=600) as client:
        return ensure_image(client, lock, DEFAULT_BASE_IMAGE, "cpu", lambda e: None)


def test_the_locked_tools_are_the_only_ones_installed(tools_image: BuiltImage) -> None:
    found, _ = imagecheck.parse_probe(_run(tools_image.id, imagecheck.PROBE))
    assert sorted((d.key, d.version) for d in found) == sorted(TOOLS.items())
    version = _run(tools_image.id, "import setuptools, pip; print(setuptools.__version__, pip.__version__)")
    assert version.split() == [TOOLS["setuptools"], TOOLS["pip"]]


def test_no_file_of_another_version_is_left_in_a_package_directory(tools_image: BuiltImage) -> None:
    data = json.loads(_run(tools_image.id, FILES))
    assert sorted(data["records"]) == sorted(f"{k}-{v}.dist-info" for k, v in TOOLS.items())
    listed = {path for rows in data["records"].values() for path in rows}
    assert data["files"] and set(data["files"]) <= listed, set(data["files"]) - listed


def test_an_image_that_is_not_its_lock_fails_the_build_in_one_line(
    ready: None, tmp_path: Path, tools_image: BuiltImage
) -> None:
    other = _lock(tmp_path, {"wheel": TOOLS["wheel"]})
    with engine(timeout=600) as client:
        built = ensure_image(client, other, DEFAULT_BASE_IMAGE, "cpu", lambda e: None)
        with pytest.raises(BuildError) as caught:  # the wheel-only image, asked to be the tools' lock
            check_installed(client, built.id, built.tag, TOOLS_LOCK, lambda e: None)
        assert find_image(client, built.id) is None  # removed: no later run reuses it
    text = str(caught.value)
    assert "\n" not in text
    assert "pip 26.2.1 is locked but not installed" in text and "setuptools 80.9.0 is locked" in text
