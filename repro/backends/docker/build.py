"""Building a run's image: from the lockfile on the base image, offline, with its wheels built first.

Also imports a root filesystem as an image (`repro base-image`) and checks that what the
image holds is what the lockfile pins.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import docker
import docker.errors

from repro import units
from repro.backends import imagecheck, images
from repro.backends.base import (
    BuiltImage,
    Event,
    OnEvent,
)
from repro.backends.baseimage import PYTHON_LABEL
from repro.backends.docker.engine import TAIL, engine, find_image, inspect_base
from repro.backends.docker.sandbox import build_wheels
from repro.errors import BuildError
from repro.facts.lockfile import parse_lockfile

VENV_PYTHON = "/opt/venv/bin/python"  # the templates' venv
_STEP = re.compile(r"^Step (\d+)/(\d+) : (\S+)(.*)$")
_LAYER = re.compile(r"\blayers/(\d+)-([\w.-]+)/")


def import_rootfs(archive: Path, tag: str, changes: list[str]) -> str:
    """Import a root filesystem tar as image ``tag`` (``docker import``); returns the image id.

    Raises:
        BackendUnavailable: no engine answers.
        BuildError: the engine rejected the archive.
    """
    repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
    with engine(timeout=600) as client:
        try:
            client.api.import_image_from_file(
                str(archive), repository=repository, tag=version, changes=changes
            )
        except docker.errors.APIError as e:
            raise BuildError(f"the engine could not import {archive.name}: {e.explanation or e}") from e
        image_id = find_image(client, tag)
    if image_id is None:
        raise BuildError(f"the import finished but no image {tag} exists")
    return image_id


def ensure_image(
    client: docker.DockerClient,
    lockfile: Path | None,
    base: str,
    template: str,
    on_event: OnEvent,
    cuda_index: str | None = None,
) -> BuiltImage:
    """Reuse the image whose tag is the hash of its inputs, or build it offline. A CUDA image's
    wheels are fetched from ``cuda_index`` (the cuda.index setting) too, and its tag and labels
    name the CUDA version of its torch.

    Raises:
        BackendUnavailable: no base image ``base``.
        BuildError: the lockfile cannot be satisfied, a CUDA image's torch is a CPU build, or the
            build failed.
    """
    inspected = inspect_base(client, base)  # a recorded id must exist in this engine too
    base_id = str(inspected["Id"])
    python = ((inspected.get("Config") or {}).get("Labels") or {}).get(PYTHON_LABEL)
    lock = lockfile.read_bytes() if lockfile is not None else b""
    dockerfile = images.render_dockerfile(template, base_id, lock.decode())
    cuda = images.cuda_of(lock.decode()) if template == "cuda" else None
    tag = images.image_tag(dockerfile, lock, base_id, cuda)
    existing = find_image(client, tag)
    if existing is not None:
        on_event(Event("info", f"reusing image {tag}"))
        labels = dict((client.api.inspect_image(existing).get("Config") or {}).get("Labels") or {})
        kinds = images.installed_from(lock.decode(), labels)
        return BuiltImage(existing, tag, base, base_id, template, dockerfile, True, 0.0, installed_from=kinds)
    start = time.monotonic()
    index = cuda_index if template == "cuda" else None
    wheels, built = build_wheels(client, lockfile, lock, base_id, python, on_event, index)
    paths = {key: wheel.path for key, wheel in wheels.items()}
    size = units.human_bytes(sum(p.stat().st_size for p in paths.values()))
    shown = f"{units.plural(len(wheels), 'wheel')}, {size}"
    on_event(Event("info", f"building image {tag} from {base} ({shown})"))
    labels = images.image_labels(lock, base_id, template, built, cuda)
    with tempfile.TemporaryFile(prefix="repro-context-") as context:
        images.write_context(context, dockerfile, lock, wheels)
        context.seek(0)
        _build(client, context, tag, labels, _BuildStages(lock, paths, on_event))
    image_id = find_image(client, tag)
    if image_id is None:
        raise BuildError(f"the build finished but no image {tag} exists")
    check_installed(client, image_id, tag, lock.decode(), on_event)
    kinds = images.installed_from(lock.decode(), labels)
    return BuiltImage(
        image_id,
        tag,
        base,
        base_id,
        template,
        dockerfile,
        False,
        time.monotonic() - start,
        installed_from=kinds,
    )


def check_installed(
    client: docker.DockerClient, image_id: str, tag: str, lock: str, on_event: OnEvent
) -> None:
    """Read the new image's installed distributions (every dist-info, duplicates included) in a
    container without network, and fail the build where they are not exactly the lock; a failed
    image is removed, so that no later run reuses it.

    Raises:
        BuildError: the image does not hold exactly its lock, or cannot be asked.
    """
    try:
        out = client.containers.run(
            image_id, [VENV_PYTHON, "-I", "-c", imagecheck.PROBE], entrypoint=[], network_disabled=True,
            network_mode="none", remove=True, stdout=True, stderr=True, user="0:0", working_dir="/",
        )  # fmt: skip
        found, env = imagecheck.parse_probe(out.decode(errors="replace"))
    except (docker.errors.APIError, docker.errors.ContainerError, ValueError, KeyError, IndexError) as e:
        _remove_image_quietly(client, image_id)
        raise BuildError(f"the image {tag} could not be checked against its lock: {str(e)[:300]}") from e
    wrong = imagecheck.differences(lock, found, env)
    if wrong:
        _remove_image_quietly(client, image_id)
        raise BuildError(
            imagecheck.message(tag, wrong), hint="the lock or the Dockerfile template is at fault"
        )
    on_event(Event("info", f"image {tag}: {units.plural(len(found), 'distribution')}, exactly the lock"))


def _remove_image_quietly(client: docker.DockerClient, image_id: str) -> None:
    with contextlib.suppress(docker.errors.APIError):
        client.api.remove_image(image_id, force=True)


class _BuildStages:
    """Turns the builder's output into stages: the base setup, then one stage per layer group
    (its COPY and pip install steps), each with its wheel count and size. Every line also goes
    on as a "build" event, for the full log."""

    def __init__(self, lock: bytes, wheels: dict[str, Path], on_event: OnEvent) -> None:
        groups = images.layer_groups(parse_lockfile(lock.decode())) if lock.strip() else []
        self.groups = [
            (name, len(reqs), sum(wheels[r.key].stat().st_size for r in reqs if r.key in wheels))
            for name, reqs in groups
        ]
        self.on_event = on_event
        self.label: str | None = None
        self.steps = self.cached = 0

    def line(self, text: str) -> None:
        step = _STEP.match(text)
        if step is not None:
            layer = _LAYER.search(step.group(4)) if step.group(3) == "COPY" else None
            if layer is not None and int(layer.group(1)) < len(self.groups):
                index = int(layer.group(1))
                name, count, size = self.groups[index]
                shown = f"{units.plural(count, 'wheel')}, {units.human_bytes(size)}"
                self._begin(f"layer {index + 1}/{len(self.groups)} {name}: {shown}")
            elif step.group(3) == "FROM" and self.label is not None:  # the image's own stage
                self._begin(f"image: {units.plural(len(self.groups), 'installed layer')}, no wheel files")
            elif self.label is None:
                self._begin("image setup: base, venv")
            self.steps += step.group(3) != "FROM"  # a FROM step is never "cached": it names the base
        elif text.strip() == "---> Using cache":
            self.cached += 1
        self.on_event(Event("build", text))

    def _begin(self, label: str) -> None:
        self.end()
        self.label, self.steps, self.cached = label, 0, 0
        self.on_event(Event("stage", label))

    def end(self) -> None:
        if self.label is not None:
            cached = " (cached)" if self.steps and self.cached >= self.steps else ""
            self.on_event(Event("stage-end", self.label + cached))
        self.label = None


def _build(
    client: docker.DockerClient, context: Any, tag: str, labels: dict[str, str], stages: _BuildStages
) -> None:
    tail: list[str] = []
    try:
        stream = client.api.build(
            fileobj=context,
            custom_context=True,
            tag=tag,
            labels=labels,
            rm=True,
            forcerm=True,
            pull=False,
            network_mode="none",  # nothing inside the build reaches the network
            decode=True,
            timeout=None,
        )
        for chunk in stream:
            if "error" in chunk or "errorDetail" in chunk:
                message = chunk.get("error") or chunk.get("errorDetail", {}).get("message", "")
                raise BuildError(
                    f"the image build failed: {message}\n" + "\n".join(tail[-TAIL:]),
                    hint="the lockfile must pin wheels for the image's Python (cp311 on bookworm)",
                )
            for line in str(chunk.get("stream", "")).splitlines():
                if line.strip():
                    tail = (tail + [line])[-TAIL:]
                    stages.line(line)
    except docker.errors.APIError as e:
        raise BuildError(f"the engine refused to build {tag}: {e.explanation or e}") from e
    stages.end()
