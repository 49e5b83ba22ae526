"""The installed distributions as the runtime reads them: what importlib.metadata reads, faster."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from repro.runtime import dists

CASES = {
    "plain": "Metadata-Version: 2.1\nName: Foo_Bar\nVersion: 1.2.3\n\nName: not-this\n",
    "folded summary first": "Metadata-Version: 2.1\nSummary: one\n  two: three\nName: foo\nVersion: 2\n",
    "no version": "Metadata-Version: 2.1\nName: foo\n\nVersion: 9\n",
    "a line that is no field ends the header": "Name: foo\nnot a field\nVersion: 3\n",
    "lower-case keys and spaces": "name:   spaced \nVERSION:\t4.0\n",
    "empty": "",
}


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_the_header_is_read_as_importlib_metadata_reads_it(tmp_path: Path, text: str) -> None:
    info = tmp_path / "foo-1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(text)
    dist = metadata.PathDistribution(info)
    assert dists.header(dist) == (dist.metadata["Name"] or "", dist.version or "")


def test_an_older_distribution_is_read_from_its_pkg_info(tmp_path: Path) -> None:
    info = tmp_path / "old.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: old\nVersion: 0.1\n")
    assert dists.header(metadata.PathDistribution(info)) == ("old", "0.1")


def test_every_installed_distribution_reads_as_importlib_metadata_reads_it() -> None:
    expected = [(d.metadata["Name"] or "", d.version or "") for d in metadata.distributions()]
    assert [(name, version) for name, version, _ in dists.installed()] == expected
    assert len(expected) > 20  # this environment: pytest, torch, click, ...
