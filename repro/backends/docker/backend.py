"""The Docker backend: build or reuse the run's image offline, then run the command in it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.backends import images, owners, scratch
from repro.backends.base import (
    BuiltImage,
    OnEvent,
    RunResult,
    RunSpec,
)
from repro.backends.baseimage import DEFAULT_BASE_IMAGE
from repro.backends.docker.archive import carried_image
from repro.backends.docker.build import ensure_image
from repro.backends.docker.container import (
    check_gpus,
    container_config,
    container_user,
    run_container,
    writable_dirs,
)
from repro.backends.docker.engine import engine
from repro.backends.images import ImageInputs


class DockerBackend:
    """Runs each command in a container built from the run's pinned inputs (`ImageInputs`, its options)."""

    name = "docker"

    def __init__(self, inputs: ImageInputs | None = None) -> None:
        self.inputs = inputs or ImageInputs()
        self._built: dict[tuple[Any, ...], BuiltImage] = {}

    def use_image(self, inputs: ImageInputs) -> None:
        """The inputs of the run about to be prepared (`repro.backends.images.BuildsImage`)."""
        self.inputs = inputs

    def _key(self, spec: RunSpec) -> tuple[Any, ...]:
        inputs = self.inputs
        return (inputs.lockfile, inputs.base_image or DEFAULT_BASE_IMAGE, images.template_for(spec.gpus))

    def prepare(self, spec: RunSpec, on_event: OnEvent) -> BuiltImage:
        """Build or reuse the run's image.

        A capsule that carries its image (``ImageInputs.image_archive``) is replayed in exactly that
        image: reused when the engine has it, else loaded from the archive; never rebuilt.

        Raises:
            BackendUnavailable: no engine, no base image, or GPUs asked for and absent.
            BuildError: the wheelhouse or the image build failed, or a carried image does not load.
        """
        inputs = self.inputs
        with engine(timeout=600) as client:
            if spec.gpus:
                check_gpus(client)
            if inputs.image_archive is not None and inputs.recorded_image:
                built = carried_image(client, inputs.recorded_image, inputs.image_archive, on_event)
                self._built[self._key(spec)] = built
                return built
            built = ensure_image(
                client,
                inputs.lockfile,
                inputs.base_image or DEFAULT_BASE_IMAGE,
                images.template_for(spec.gpus),
                on_event,
                inputs.cuda_index,
            )
        self._built[self._key(spec)] = built
        return built

    def container_config(
        self, spec: RunSpec, built: BuiltImage, uid: int, gid: int, tree: Path
    ) -> dict[str, Any]:
        """The container's configuration (an engine beside Docker's adds its own fields)."""
        return container_config(spec, built, uid, gid, tree, self.inputs.shm_size)

    def execute(self, spec: RunSpec, on_event: OnEvent) -> RunResult:
        """Run the command in a fresh container, streaming its output; always removes it.

        Raises:
            BackendUnavailable: the engine went away, or GPUs were asked for and are absent.
        """
        built = self._built.get(self._key(spec))
        if built is None:
            self.prepare(spec, on_event)
            built = self._built[self._key(spec)]
        uid, gid = container_user()
        work = spec.runtime_dir.parent
        tree = work / scratch.TREE
        scratch.make(spec.project_root, tree, [*spec.data, *spec.outputs])
        writable = [*writable_dirs(spec), tree]
        for path in writable:
            path.mkdir(parents=True, exist_ok=True)
        tops = [spec.project_root, spec.data_root or spec.project_root]
        saved = owners.open_for(uid, gid, writable, tops, work / owners.STATE)
        config = self.container_config(spec, built, uid, gid, tree)
        try:
            with engine() as client:
                result = run_container(client, config, spec, built, on_event)
        except BaseException:
            owners.restore(saved)
            (work / owners.STATE).unlink(missing_ok=True)
            raise
        # What the command wrote into its copy of the project lands where a local run puts it;
        # a repro killed before this line leaves the copy to `repro resume` or `repro gc`.
        result.written = scratch.recover(work, spec.project_root)
        return result
