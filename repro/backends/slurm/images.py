"""The image the nodes run a Slurm job's ranks in (``--node-env docker`` or ``podman``): built or reused
by that engine's own backend, as a run on it would be; for Podman, also saved as an archive in the store
(a directory the nodes share), which each node loads once into its own storage.
"""

from __future__ import annotations

from pathlib import Path

from repro.backends.base import BuiltImage, OnEvent, RunSpec
from repro.backends.images import ImageInputs

NODE_IMAGES = "node-images"  # under the store: the archives the nodes load the run's image from


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
