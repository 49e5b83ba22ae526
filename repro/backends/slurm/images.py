"""The image the nodes run a Slurm job's ranks in (``--node-env docker`` or ``podman``): built or reused
by that engine's own backend, as a run on it would be; for Podman, also saved as an archive in the store
(a directory the nodes share), which each node loads once into its own storage.

Each node's storage is a cache of those archives: `repro gc --images` removes from the storages this
machine sees the images whose archive it removes (a node missing one loads it again from an archive).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from repro.backends.base import BuiltImage, OnEvent, RunSpec
from repro.backends.images import ImageInputs

NODE_IMAGES = "node-images"  # under the store: the archives the nodes load the run's image from
NODE_STORAGE = "/tmp"  # node-local: each node's Podman storage, one directory per node name, below it
PODMAN_TIMEOUT_S = 300


def storage_base(uid: int | None = None) -> Path:
    """The directory holding this user's Podman storage of each node (``<node>/root``, ``<node>/run``)."""
    return Path(NODE_STORAGE) / f"repro-podman-{os.getuid() if uid is None else uid}"


def archive_dir(spec: RunSpec) -> Path:
    """Where the nodes find the run's image archive: the store, on the filesystem they share."""
    return (spec.store_dir or spec.runtime_dir) / NODE_IMAGES


def node_image(
    engine: str, inputs: ImageInputs, spec: RunSpec, on_event: OnEvent
) -> tuple[BuiltImage, Path | None]:
    """Build or reuse the run's image with ``engine``'s backend; with podman, the archive the nodes load.

    Raises:
        BackendUnavailable: the engine is not usable here.
        BuildError: the image could not be built or saved.
    """
    if engine == "podman":
        from repro.backends.podman.backend import PodmanBackend

        podman = PodmanBackend(inputs)
        try:
            built = podman.prepare(spec, on_event)
        finally:
            podman.stop()
        return built, podman.archive(built, archive_dir(spec), on_event)
    from repro.backends.docker.backend import DockerBackend

    return DockerBackend(inputs).prepare(spec, on_event), None


def unused_archives(store_dir: Path, needed: set[str]) -> list[Path]:
    """The image archives in the store's ``node-images`` whose image no run in ``needed`` uses."""
    folder = store_dir / NODE_IMAGES
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.tar") if f"sha256:{p.stem}" not in needed and p.is_file())


@dataclass(frozen=True)
class NodePrune:
    """What `prune_node_storages` did with one image in one node's storage."""

    node: str
    image: str
    removed: bool
    why: str = ""  # why it was kept


def _podman(storage: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = ["podman", f"--root={storage}/root", f"--runroot={storage}/run", *args]
    return subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=PODMAN_TIMEOUT_S
    )


def node_storages(base: Path | None = None) -> list[Path]:
    """The nodes' Podman storages this machine sees under ``base`` (default `storage_base`): on a
    cluster whose nodes share this machine's /tmp (the local one), every node's; else its own only."""
    folder = storage_base() if base is None else base
    try:
        return sorted(p for p in folder.iterdir() if (p / "root").is_dir())
    except OSError:
        return []


def prune_node_storages(image_ids: list[str], dry_run: bool, base: Path | None = None) -> list[NodePrune]:
    """Remove ``image_ids`` from each node storage that holds one (`node_storages`); one entry per image
    found. An image a container still uses is kept (`podman rmi` without force), with podman's reason."""
    done: list[NodePrune] = []
    for storage in node_storages(base):
        for image in image_ids:
            try:
                if _podman(storage, "image", "exists", image).returncode != 0:
                    continue
                removed = dry_run or _podman(storage, "rmi", image)
            except (OSError, subprocess.TimeoutExpired) as e:
                done.append(NodePrune(storage.name, image, False, f"podman did not answer ({e})"))
                continue
            if isinstance(removed, subprocess.CompletedProcess) and removed.returncode != 0:
                why = (removed.stderr.strip().splitlines() or ["podman rmi failed"])[-1][-200:]
                done.append(NodePrune(storage.name, image, False, why))
            else:
                done.append(NodePrune(storage.name, image, True))
    return done
