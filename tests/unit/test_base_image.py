"""The base image `repro base-image` makes: its packages (the C++ toolchain torch.compile needs), and
the labels that record its Python and its compiler."""

from __future__ import annotations

import re
from pathlib import Path

from repro.backends import baseimage

REPO = Path(__file__).resolve().parents[2]

STATUS = """\
Package: g++
Status: install ok installed
Version: 4:12.2.0-3

Package: g++-12
Status: install ok installed
Priority: optional
Version: 12.2.0-14
Description: GNU C++ compiler
 a continuation line: with a colon

Package: python3.11
Status: install ok installed
Version: 3.11.2-6
"""


def test_the_base_carries_a_cxx_compiler_and_the_python_headers() -> None:
    assert {"g++", "python3-dev", "python3-venv"} <= set(baseimage.PACKAGES)


def test_docker_up_remakes_a_base_made_with_other_packages() -> None:
    script = (REPO / "scripts" / "docker-up.sh").read_text()
    listed = re.search(r'base_packages="\$\{REPRO_BASE_PACKAGES:-([^}]*)\}"', script)
    assert listed is not None and listed.group(1) == ",".join(baseimage.PACKAGES)
    assert baseimage.PACKAGES_LABEL in script


def test_the_labels_name_the_python_and_the_compiler(tmp_path: Path) -> None:
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text(STATUS)
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/python3").symlink_to("python3.11")
    assert baseimage.compiler_version(tmp_path) == "g++ 12.2.0"
    labels = baseimage.base_labels(tmp_path)
    assert f'LABEL {baseimage.COMPILER_LABEL}="g++ 12.2.0"' in labels
    assert f"LABEL {baseimage.PYTHON_LABEL}=3.11" in labels
    assert f"LABEL {baseimage.PACKAGES_LABEL}={','.join(baseimage.PACKAGES)}" in labels


def test_a_root_without_a_compiler_has_no_compiler_label(tmp_path: Path) -> None:
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text(STATUS.split("\n\n")[-1])
    assert baseimage.compiler_version(tmp_path) is None
    assert not any(baseimage.COMPILER_LABEL in label for label in baseimage.base_labels(tmp_path))
