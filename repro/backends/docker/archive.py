"""Images as files: save a run's image into a capsule, load a carried one back into the engine."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Iterable
from pathlib import Path

import docker
import docker.errors
import requests.exceptions

from repro.backends import imagearchive, images
from repro.backends.base import (
    BuiltImage,
    Event,
    OnEvent,
    OpenImage,
)
from repro.backends.docker.engine import engine, find_image
from repro.errors import BuildError, CapsuleInvalid, NotFoundError

_LOADED = re.compile(r"Loaded image(?: ID)?: (sha256:[0-9a-f]{64})")  # Docker; Podman says "image:"


def carried_image(
    client: docker.DockerClient, recorded: BuiltImage, archive: OpenImage, on_event: OnEvent
) -> BuiltImage:
    """The recorded image, checked against the capsule's archive: the engine's copy when it has that
    id, else loaded from the archive with every name in it ignored; tagged ``repro-env:sha256-…``
    only, so no tag the capsule names is created or moved: the engine gets the archive repro rebuilt
    (`imagearchive.rebuilt`), never the capsule's.

    Raises:
        CapsuleInvalid: the archive does not hold the recorded image, or loads another one
            (what it loaded is removed again).
        BuildError: the engine rejected the archive.
    """
    image_id = recorded.id
    with archive() as stream:
        held = imagearchive.read_index(stream).images
    if image_id not in held:
        shown = ", ".join(i[:19] for i in held) or "no image"
        raise CapsuleInvalid(
            f"the capsule's image archive holds {shown}, not the recorded image {image_id[:19]}",
            hint="the image archive was replaced or the record edited; do not replay this capsule",
        )
    loaded = find_image(client, image_id) is None
    if loaded:
        shown = image_id[:19]
        on_event(Event("info", f"loading image {shown} from the capsule (no build; names in it are ignored)"))
        _load_untagged(client, archive, held[image_id], image_id, on_event)
    else:
        on_event(Event("info", f"reusing image {image_id[:19]} (the one the capsule carries)"))
    tag = images.carried_tag(image_id)
    repository, _, version = tag.partition(":")
    client.api.tag(image_id, repository, version)
    return dataclasses.replace(recorded, tag=tag, reused=not loaded, build_seconds=0.0, loaded=loaded)


def _load_untagged(
    client: docker.DockerClient,
    archive: OpenImage,
    image: imagearchive.Image,
    image_id: str,
    on_event: OnEvent,
) -> None:
    """Load ``image`` of ``archive``, rebuilt nameless (`imagearchive.rebuilt`), and make sure the
    engine named it ``image_id``; whatever else it loaded, or all of it on failure, is removed.

    Raises:
        CapsuleInvalid: the engine loaded an image of another id.
        BuildError: the engine rejected the archive.
    """
    before = {str(item["Id"]) for item in client.api.images(all=True)}
    reported: list[str] = []
    try:
        with archive() as stream:
            load_image(client, imagearchive.rebuilt(stream, image), on_event, reported)
        if find_image(client, image_id) is None or any(i != image_id for i in reported):
            shown = ", ".join(i[:19] for i in reported) or "no image"
            raise CapsuleInvalid(
                f"the capsule's image archive loaded {shown}, not the recorded image {image_id[:19]}; "
                "it was removed again",
                hint="the image archive was replaced or the record edited; do not replay this capsule",
            )
    except BaseException:
        for doomed in {*reported, image_id} - before:
            with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
                client.api.remove_image(doomed)
        raise


def save_image(image_id: str, tag: str | None, dest: Path) -> int:
    """Write ``docker save`` of one image (every layer once, with its tag) to ``dest``; its size.

    Raises:
        BackendUnavailable: no engine answers.
        NotFoundError: the engine has no such image.
    """
    with engine(timeout=600) as client:
        if find_image(client, image_id) is None:
            raise NotFoundError(
                f"the Docker engine has no image {image_id[:19]} to export",
                hint="replay the run once on this engine (it rebuilds the image), then export again",
            )
        ref = tag if tag and find_image(client, tag) == image_id else image_id
        tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
        try:
            with open(tmp, "wb") as f:
                for chunk in client.api.get_image(ref, chunk_size=1 << 20):
                    f.write(chunk)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
    return dest.stat().st_size


def load_image(
    client: docker.DockerClient, archive: Iterable[bytes], on_event: OnEvent, loaded: list[str] | None = None
) -> list[str]:
    """``docker load`` an image archive streamed in chunks; the ids the engine says it loaded (also
    appended to ``loaded`` as they come, so a caller knows them when the load fails half-way).

    Raises:
        BuildError: the engine rejected the archive.
    """
    loaded = [] if loaded is None else loaded
    try:
        for chunk in client.api.load_image(archive):
            if isinstance(chunk, dict) and chunk.get("error"):
                raise BuildError(f"the engine could not load the capsule's image: {chunk['error']}")
            text = str(chunk.get("stream", "")).strip() if isinstance(chunk, dict) else ""
            if text:
                loaded += _LOADED.findall(text)
                on_event(Event("build", text))
    except docker.errors.APIError as e:
        raise BuildError(f"the engine could not load the capsule's image: {e.explanation or e}") from e
    return loaded
