"""The podman backend: the docker backend's image build and run contract, on rootless Podman.

repro starts `podman system service` for the run (`repro.backends.podman.service`) and drives it with the
docker backend's code. The container runs as this user through ``--userns=keep-id``: the uid inside is
the uid outside, so whatever it writes into the project is owned by the user, never by a sub-id.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from repro.backends.base import BuiltImage, Event, OnEvent, RunResult, RunSpec
from repro.backends.baseimage import DEFAULT_BASE_IMAGE
from repro.backends.docker.backend import DockerBackend
from repro.backends.docker.container import HOST_EXTRA
from repro.backends.docker.engine import served_at
from repro.backends.images import ImageInputs
from repro.backends.podman.service import BASE_HINT, Service, has_image, save_archive
from repro.errors import BackendUnavailable


class PodmanBackend(DockerBackend):
    """Runs each command in a rootless Podman container built from the run's pinned inputs."""

    name = "podman"

    def __init__(self, inputs: ImageInputs | None = None) -> None:
        super().__init__(inputs)
        self._service = Service()
        atexit.register(self._service.stop)

    @contextmanager
    def _served(self, on_event: OnEvent) -> Iterator[None]:
        fresh = not self._service.running
        self._service.start()
        if fresh:
            on_event(Event("info", f"podman: API service up in {self._service.started_s:.2f}s"))
        with served_at(self._service.url, self._service.owner()):
            yield

    def prepare(self, spec: RunSpec, on_event: OnEvent) -> BuiltImage:
        """Build or reuse the run's image in this user's Podman storage (the service stays up for
        the run).

        Raises:
            BackendUnavailable: no podman, user namespaces disabled, no base image in this storage.
            BuildError: the wheelhouse or the image build failed, or a carried image does not load.
        """
        base = self.inputs.base_image or DEFAULT_BASE_IMAGE
        if self.inputs.image_archive is None and not has_image(base):
            raise BackendUnavailable(f"your Podman storage has no base image {base}", hint=BASE_HINT)
        try:
            with self._served(on_event):
                return super().prepare(spec, on_event)
        except BaseException:
            self._service.stop()
            raise

    def stop(self) -> None:
        """Stop the API service this backend started (idempotent)."""
        self._service.stop()

    def archive(self, built: BuiltImage, folder: Path, on_event: OnEvent) -> Path:
        """The image saved as an archive in ``folder`` (`podman save`; kept, and reused, by its id), for
        other machines' Podman storage to load.

        Raises:
            BuildError: podman could not save it.
        """
        return save_archive(built.id or built.tag, folder, on_event)

    def container_config(
        self, spec: RunSpec, built: BuiltImage, uid: int, gid: int, tree: Path
    ) -> dict[str, Any]:
        config = super().container_config(spec, built, uid, gid, tree)
        if os.getuid() != 0:  # rootless: this user is the container's user, not a sub-id
            config[HOST_EXTRA] = {"UsernsMode": "keep-id"}
            if spec.network:  # a user-mode network stack of its own (a bridge needs a rootless netns)
                config["host_config"]["network_mode"] = "slirp4netns"
        return config

    def execute(self, spec: RunSpec, on_event: OnEvent) -> RunResult:
        """Run the command in a fresh container and stop the service after it.

        Raises:
            BackendUnavailable: podman went away, or its service did not start.
        """
        try:
            with self._served(on_event):
                return super().execute(spec, on_event)
        finally:
            self._service.stop()
