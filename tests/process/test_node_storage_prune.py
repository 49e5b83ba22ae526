"""`repro gc --images` and the nodes' Podman storages (`--node-env podman`): an image whose archive it
removes is removed from each node storage this machine sees, with the argv a node's task uses for that
storage; one a container still uses is kept, with podman's reason. A `podman` stand-in on PATH answers
from a file per storage and logs each call, so the argv is what is checked."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from repro.backends.slurm import images
from tests.conftest import Project

KEEP = "sha256:" + "c" * 64  # a container of a running job uses it

FAKE_PODMAN = f"""#!/bin/sh
echo "$*" >> "$PODMAN_LOG"
root="${{1#--root=}}"
held="$(dirname "$root")/held"
case "$3 $4" in
  "image exists") grep -qx "$5" "$held" 2>/dev/null; exit $? ;;
esac
if [ "$3" = rmi ]; then
  if [ "$4" = "{KEEP}" ]; then
    echo "Error: image used by 0123abcd: image is in use by a container" >&2; exit 2
  fi
  grep -vx "$4" "$held" > "$held.new"; mv "$held.new" "$held"; exit 0
fi
exit 9
"""


@pytest.fixture
def nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two nodes' storages under a base of the test's, and a podman stand-in that logs its argv."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "podman").write_text(FAKE_PODMAN)
    (bin_dir / "podman").chmod(0o755)
    log = tmp_path / "podman.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PODMAN_LOG", str(log))
    base = tmp_path / "tmp"
    monkeypatch.setattr(images, "NODE_STORAGE", str(base))
    return images.storage_base(), log


def _node(base: Path, name: str, *held: str) -> Path:
    (base / name / "root").mkdir(parents=True)
    (base / name / "held").write_text("".join(f"{i}\n" for i in held))
    return base / name


def test_each_node_storage_loses_the_unused_image_and_keeps_one_in_use(nodes: tuple[Path, Path]) -> None:
    base, log = nodes
    assert base.name == f"repro-podman-{os.getuid()}"  # where a node's task keeps its storage
    gone, other = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    n1 = _node(base, "n1", gone, other, KEEP)
    n2 = _node(base, "n2", other)
    (base / "not-a-storage").mkdir()  # no root/ below it: not a node's storage

    dry = images.prune_node_storages([gone, KEEP], dry_run=True)
    assert [(d.node, d.image, d.removed) for d in dry] == [("n1", gone, True), ("n1", KEEP, True)]
    assert " rmi " not in log.read_text()  # --dry-run removes nothing

    done = images.prune_node_storages([gone, KEEP], dry_run=False)
    assert [(d.node, d.image, d.removed) for d in done] == [("n1", gone, True), ("n1", KEEP, False)]
    assert "in use by a container" in done[1].why
    calls = log.read_text().splitlines()
    assert f"--root={n1}/root --runroot={n1}/run rmi {gone}" in calls
    assert f"--root={n2}/root --runroot={n2}/run image exists {gone}" in calls
    assert not any(" rmi " in c and str(n2) in c for c in calls)  # n2 held none of them
    assert (n1 / "held").read_text().split() == [other, KEEP]  # another store's image stays
    assert (n2 / "held").read_text().split() == [other]


def test_no_storage_here_is_nothing_to_do(nodes: tuple[Path, Path]) -> None:
    base, log = nodes
    assert images.node_storages() == [] and images.prune_node_storages(["sha256:" + "a" * 64], False) == []
    assert not log.exists()  # podman was not even asked


def test_gc_images_removes_an_unused_archive_and_its_image_from_the_nodes(
    nodes: tuple[Path, Path], project: Project, cli: Any
) -> None:
    base, log = nodes
    gone = "a" * 64
    archive = project.root / ".repro" / "node-images" / f"{gone}.tar"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"\0" * 2048)  # no run of the store uses it
    n1 = _node(base, "n1", f"sha256:{gone}", KEEP)

    r = cli("gc", "--images", "--dry-run", cwd=project.root)
    assert r.code == 0, r.err
    assert f"would remove image archive {gone}.tar" in r.out
    assert f"would remove image sha256:{gone[:12]} in node n1's Podman storage" in r.out
    assert archive.is_file() and " rmi " not in log.read_text()

    r = cli("gc", "--images", cwd=project.root)
    assert r.code == 0, r.err
    assert f"removed image sha256:{gone[:12]} in node n1's Podman storage" in r.out
    assert not archive.exists() and (n1 / "held").read_text().split() == [KEEP]
