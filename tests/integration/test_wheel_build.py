"""repro's own wheel builds cleanly: no deprecation warnings from the build backend."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import REPO


def test_the_wheel_builds_without_deprecation_warnings_and_names_its_license(tmp_path: Path) -> None:
    src = tmp_path / "src"
    junk = shutil.ignore_patterns(".git", ".venv", ".bench", ".repro", "build", "dist", "*.egg-info",
                                  "__pycache__", "outputs", "tests", "benchmarks")  # fmt: skip
    shutil.copytree(REPO, src, ignore=junk, symlinks=True)
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v"]
    done = subprocess.run([*build, "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "deprecat" not in said.lower(), [line for line in said.splitlines() if "eprecat" in line]
    (wheel,) = (tmp_path / "dist").glob("repro_capsule-*.whl")
    metadata = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith("METADATA"))
    assert "License-Expression: Apache-2.0" in zipfile.ZipFile(wheel).read(metadata).decode()
