"""The base image `repro base-image` makes: its packages (the C++ toolchain torch.compile needs), and
the labels that record its Python and its compiler."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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


def test_without_root_mmdebstrap_makes_the_tar_and_the_labels_are_read_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import tarfile

    asked: list[list[str]] = []

    def fake_run(argv: list[str], on_line: object, what: str) -> None:  # what mmdebstrap writes: a tar
        asked.append(argv)
        with tarfile.open(argv[-2], "w") as tar:
            link = tarfile.TarInfo("./usr/bin/python3")
            link.type, link.linkname = tarfile.SYMTYPE, "python3.11"
            tar.addfile(link)
            status = tarfile.TarInfo("./var/lib/dpkg/status")
            status.size = len(STATUS.encode())
            tar.addfile(status, io.BytesIO(STATUS.encode()))

    imported: list[list[str]] = []

    def fake_import(archive: Path, tag: str, changes: list[str]) -> str:
        imported.append(changes)
        return "sha256:ab"

    monkeypatch.setattr(baseimage, "_run", fake_run)
    monkeypatch.setattr(baseimage, "rootless", lambda: True)
    monkeypatch.setenv("REPRO_TMPDIR", str(tmp_path))
    made = baseimage.make_base_image(fake_import)
    assert made.id == "sha256:ab" and asked[0][:2] == ["mmdebstrap", "--mode=unshare"]
    assert f"--include={','.join(baseimage.PACKAGES)}" in asked[0] and asked[0][-3] == "bookworm"
    assert f'LABEL {baseimage.COMPILER_LABEL}="g++ 12.2.0"' in imported[0]
    assert f"LABEL {baseimage.PYTHON_LABEL}=3.11" in imported[0]
