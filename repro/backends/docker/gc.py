"""Housekeeping: which of repro's images and containers may go, and removing them (`repro gc`)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors

from repro.backends import images
from repro.backends.docker.engine import (
    LABEL_HOST,
    LABEL_PID,
    LABEL_RUN,
    LABEL_STORE,
    engine,
    engine_available,
    find_image,
)
from repro.errors import ReproError
from repro.store.processes import pid_alive


def repro_images() -> list[str]:
    """The images repro built for runs (labelled with their template), newest first; [] without an engine."""
    try:
        with engine(timeout=5) as client:
            found = client.api.images(filters={"label": images.LABEL_TEMPLATE})
    except ReproError:
        return []
    return [str(i["Id"]) for i in sorted(found, key=lambda i: i.get("Created", 0), reverse=True)]


@dataclass
class ImageEntry:
    """One image `repro gc --images` looked at."""

    id: str
    tags: list[str]
    size: int  # bytes only this image holds: what removing it alone frees


@dataclass
class ImageSweep:
    """What `remove_images` removed (or, on a dry run, would remove), kept, and found gone."""

    removed: list[ImageEntry] = field(default_factory=list)
    kept: list[tuple[ImageEntry, str]] = field(default_factory=list)  # with the reason
    gone: list[str] = field(default_factory=list)  # ids the engine no longer has
    freed: int | None = None  # bytes the engine's layer storage shrank by (None on a dry run)


def remove_images(candidates: Iterable[str], base: str, dry_run: bool = False) -> ImageSweep:
    """Remove the images ``candidates`` names by id — the only images this may touch — except the
    base image ``base``, an image someone tagged outside ``repro-env``, one other images were built
    on, and one a container uses: those are kept, with the reason.

    Raises:
        BackendUnavailable: no engine answers.
    """
    sweep = ImageSweep()
    with engine() as client:
        usage = client.api.df()
        sizes = {
            str(i["Id"]): int(i.get("Size") or 0) - int(i.get("SharedSize") or 0) for i in usage["Images"]
        }
        base_id = find_image(client, base)
        family = _Family(client)
        for image_id in dict.fromkeys(candidates):
            found = _inspect_or_none(client, image_id)
            if found is None:
                sweep.gone.append(image_id)
                continue
            tags = [t for t in (found.get("RepoTags") or []) if t != "<none>:<none>"]
            entry = ImageEntry(image_id, tags, max(0, sizes.get(image_id, 0)))
            why = _why_kept(client, entry, base_id, family)
            if why is None and not dry_run:
                why = _remove_image(client, entry)
            if why is None:
                sweep.removed.append(entry)
            else:
                sweep.kept.append((entry, why))
        if sweep.removed and not dry_run:
            sweep.freed = max(0, int(usage["LayersSize"]) - int(client.api.df()["LayersSize"]))
    return sweep


def _inspect_or_none(client: docker.DockerClient, ref: str) -> dict[str, Any] | None:
    try:
        return dict(client.api.inspect_image(ref))
    except docker.errors.ImageNotFound:
        return None


class _Family:
    """Which images were built on which: the engine's parent links (the classic builder) and, for
    BuildKit builds that leave none, an image that carries another's repro labels and extends its
    layers."""

    def __init__(self, client: docker.DockerClient) -> None:
        self.client = client
        listed = client.api.images(all=True)
        self.parents = {str(i["Id"]): str(i.get("ParentId") or "") for i in listed}
        self.tags = {
            str(i["Id"]): [t for t in i.get("RepoTags") or [] if t != "<none>:<none>"] for i in listed
        }
        self.leaves = [str(i["Id"]) for i in client.api.images()]
        self._inspected: dict[str, dict[str, Any] | None] = {}

    def _inspect(self, image_id: str) -> dict[str, Any] | None:
        if image_id not in self._inspected:
            self._inspected[image_id] = _inspect_or_none(self.client, image_id)
        return self._inspected[image_id]

    def _descends(self, image_id: str, ancestor: str) -> bool:
        up, seen = self.parents.get(image_id, ""), 0
        while up and seen < 10_000:
            if up == ancestor:
                return True
            up, seen = self.parents.get(up, ""), seen + 1
        return False

    def child_of(self, image_id: str) -> str | None:
        """An image built on ``image_id`` (by its tag when one is tagged), if there is one."""
        children = [other for other in self.parents if self._descends(other, image_id)]
        if not children:
            children = [
                other for other in self.leaves if other != image_id and self._extends(other, image_id)
            ]
        if not children:
            return None
        named = [tag for child in children for tag in self.tags.get(child, [])]
        return named[0] if named else children[0].removeprefix("sha256:")[:12]

    def _extends(self, other: str, image_id: str) -> bool:
        """Whether ``other`` carries ``image_id``'s repro labels, was made after it and extends its
        layers: what an image built on it with BuildKit (no parent link) looks like."""
        ours, theirs = self._inspect(image_id) or {}, self._inspect(other) or {}
        labels = _own_labels(ours)
        if not labels or not labels.items() <= _own_labels(theirs).items():
            return False  # a child inherits every label of the image it was built on
        if str(theirs.get("Created", "")) <= str(ours.get("Created", "")):
            return False  # an image made before this one was not built on it
        layers = list((ours.get("RootFS") or {}).get("Layers") or [])
        return list((theirs.get("RootFS") or {}).get("Layers") or [])[: len(layers)] == layers


def _own_labels(inspected: dict[str, Any]) -> dict[str, str]:
    labels = (inspected.get("Config") or {}).get("Labels") or {}
    return {k: str(v) for k, v in labels.items() if k.startswith(images.LABEL_PREFIX)}


def _why_kept(
    client: docker.DockerClient, entry: ImageEntry, base_id: str | None, family: _Family
) -> str | None:
    if entry.id == base_id:
        return "it is the base image (image.base)"
    foreign = [t for t in entry.tags if not images.is_own_tag(t)]
    if foreign:
        return f"it is also tagged {', '.join(foreign[:3])}"
    child = family.child_of(entry.id)
    if child is not None:
        return f"image {child} was built on it"
    if client.api.containers(all=True, filters={"ancestor": entry.id}):
        return "a container uses it"
    return None


def _remove_image(client: docker.DockerClient, entry: ImageEntry) -> str | None:
    """Remove one image, its repro-env tags first, never forced; the engine's refusal, if it refuses."""
    try:
        for ref in [*entry.tags, entry.id]:
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.api.remove_image(ref)
    except docker.errors.APIError as e:
        return f"the engine refused: {e.explanation or e}"
    return None


def remove_stale_containers(store_dir: Path, dry_run: bool = False) -> list[str]:
    """Remove containers of this store whose repro process is gone; returns their names.

    Only containers labelled with this store's path, started on this host, qualify: the
    engine may be shared, and another store's or another live run's containers stay.

    Raises:
        BackendUnavailable: no engine answers.
    """
    store = str(store_dir.resolve())
    host = socket.gethostname()
    removed: list[str] = []
    with engine() as client:
        for item in client.api.containers(all=True, filters={"label": f"{LABEL_STORE}={store}"}):
            labels = item.get("Labels") or {}
            pid = labels.get(LABEL_PID, "")
            if labels.get(LABEL_HOST) != host or not pid.isdigit() or pid_alive(int(pid)):
                continue
            name = ((item.get("Names") or [""])[0] or str(item["Id"])[:12]).lstrip("/")
            if not dry_run:
                with contextlib.suppress(docker.errors.NotFound):
                    client.api.remove_container(item["Id"], force=True, v=True)
            removed.append(name)
    return removed

    return True


def live_containers(store_dir: Path, run_id: str) -> list[str]:
    """Names of the containers of run ``run_id`` (of this store) that are not stopped yet.

    None when no engine answers: a container cannot run without its engine.
    """
    if not engine_available():
        return []
    filters = {"label": [f"{LABEL_STORE}={store_dir.resolve()}", f"{LABEL_RUN}={run_id}"]}
    with engine() as client:
        found = client.api.containers(all=True, filters=filters)
    return [
        ((item.get("Names") or [""])[0] or str(item["Id"])[:12]).lstrip("/")
        for item in found
        if item.get("State") not in _STOPPED
    ]


_STOPPED = ("created", "exited", "dead")  # states in which no process of the container runs
