"""A capsule's image archive (``docker save``) read and rewritten without an engine.

The archive is a stranger's file. Loaded as it is, its ``manifest.json`` ``RepoTags``, its
legacy ``repositories`` file and an OCI ``index.json``'s name annotations would make the engine
tag images: move ``repro-base:bookworm`` to the archive's image, say, so that every later build
starts from it. So the archive is read twice: `read_index` finds the images it holds by their
ids (the sha256 of each image's config, what the engine names the image after loading it), then
`untagged` streams it to the engine with every name taken out and only the wanted image left in
the manifest; every other member passes through byte for byte. The engine then checks each
layer against the config, so an image that loads under the recorded id is the recorded image.

This module imports no docker; ``repro.backends.docker`` talks to the engine.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from repro.errors import CapsuleInvalid

MANIFEST = "manifest.json"
REPOSITORIES = "repositories"  # the legacy name file: dropped, never loaded
OCI_INDEX = "index.json"
# The annotations through which an OCI archive names its images.
NAME_ANNOTATIONS = ("org.opencontainers.image.ref.name", "io.containerd.image.name")
MAX_MANIFEST_BYTES = 1 << 20  # one short JSON entry per image: a few hundred bytes each
MAX_CONFIG_BYTES = 16 << 20  # an image config is a few kilobytes
MAX_IMAGES = 64  # images in one archive (repro saves one)
_CHUNK = 1 << 20
_BLOCK = tarfile.BLOCKSIZE
_HINT = "the capsule's image archive was replaced or damaged; do not replay it"
_WHAT = "the capsule's image archive"


@dataclass(frozen=True)
class ArchiveIndex:
    """The images an archive holds: image id → the archive member holding its config."""

    configs: dict[str, str]


def _name(info: tarfile.TarInfo) -> str:
    return info.name[2:] if info.name.startswith("./") else info.name


def _read_small(tar: tarfile.TarFile, info: tarfile.TarInfo, bound: int) -> bytes:
    if not info.isreg():
        raise CapsuleInvalid(f"{_WHAT}: {_name(info)!r} is not a regular file", hint=_HINT)
    if info.size > bound:
        raise CapsuleInvalid(f"{_WHAT}: {_name(info)!r} is larger than {bound >> 10} KiB", hint=_HINT)
    member = tar.extractfile(info)
    assert member is not None  # a regular file
    with member:
        return member.read()


def _manifest(raw: bytes) -> list[dict[str, Any]]:
    try:
        entries = json.loads(raw)
    except ValueError as e:
        raise CapsuleInvalid(f"{_WHAT}: {MANIFEST} is not JSON", hint=_HINT) from e
    ok = isinstance(entries, list) and len(entries) <= MAX_IMAGES
    if not ok or not all(isinstance(e, dict) and isinstance(e.get("Config"), str) for e in entries):
        raise CapsuleInvalid(f"{_WHAT}: {MANIFEST} is not a list of images", hint=_HINT)
    return list(entries)


def read_index(stream: IO[bytes]) -> ArchiveIndex:
    """The images ``stream`` (a seekable ``docker save`` archive) holds, by id: each config's sha256.

    Raises:
        CapsuleInvalid: not a tar, no manifest, a malformed manifest or an oversized member.
    """
    try:
        with tarfile.open(fileobj=stream, mode="r:") as tar:
            members = {_name(info): info for info in tar.getmembers()}
            if MANIFEST not in members:
                raise CapsuleInvalid(f"{_WHAT} has no {MANIFEST}: it names no image", hint=_HINT)
            configs: dict[str, str] = {}
            for entry in _manifest(_read_small(tar, members[MANIFEST], MAX_MANIFEST_BYTES)):
                path = entry["Config"]
                if path not in members:
                    raise CapsuleInvalid(f"{_WHAT}: {MANIFEST} names a missing config {path!r}", hint=_HINT)
                digest = hashlib.sha256(_read_small(tar, members[path], MAX_CONFIG_BYTES)).hexdigest()
                configs[f"sha256:{digest}"] = path
    except (tarfile.TarError, EOFError) as e:
        raise CapsuleInvalid(f"{_WHAT} is not a readable tar: {e}", hint=_HINT) from e
    return ArchiveIndex(configs)


def untagged(stream: IO[bytes], config: str) -> Iterator[bytes]:
    """``stream`` as a tar to load: only the image whose config is member ``config`` in the manifest,
    with no name (no ``RepoTags``, no ``repositories``, no OCI name annotations); every other
    member as it was. Read front to back; memory stays at one chunk.

    Raises:
        CapsuleInvalid: the archive is not a readable tar, or its manifest does not name ``config``.
    """
    try:
        # Random access where the stream allows it (a capsule member does): tarfile's stream mode
        # copies every byte through small buffers, at a third of the speed.
        if stream.seekable():
            tar = tarfile.open(fileobj=stream, mode="r:")
        else:
            tar = tarfile.open(fileobj=stream, mode="r|", bufsize=_CHUNK)
        with tar:
            for info in tar:
                name = _name(info)
                if name == REPOSITORIES:
                    continue
                if name == MANIFEST:
                    entries = _manifest(_read_small(tar, info, MAX_MANIFEST_BYTES))
                    kept = [_without_names(e) for e in entries if e["Config"] == config]
                    if not kept:
                        raise CapsuleInvalid(f"{_WHAT}: {MANIFEST} no longer names {config!r}", hint=_HINT)
                    yield from _member(info, json.dumps(kept).encode())
                elif name == OCI_INDEX and info.isreg():
                    yield from _member(info, _index_without_names(_read_small(tar, info, MAX_MANIFEST_BYTES)))
                else:
                    yield from _passed(tar, info)
    except (tarfile.TarError, EOFError) as e:
        raise CapsuleInvalid(f"{_WHAT} is not a readable tar: {e}", hint=_HINT) from e
    yield b"\0" * (2 * _BLOCK)  # the end-of-archive marker


def _without_names(entry: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in entry.items() if key != "RepoTags"}


def _index_without_names(raw: bytes) -> bytes:
    try:
        index = json.loads(raw)
    except ValueError as e:
        raise CapsuleInvalid(f"{_WHAT}: {OCI_INDEX} is not JSON", hint=_HINT) from e
    manifests = index.get("manifests") if isinstance(index, dict) else None
    for manifest in manifests if isinstance(manifests, list) else []:
        notes = manifest.get("annotations") if isinstance(manifest, dict) else None
        if isinstance(notes, dict):
            for key in NAME_ANNOTATIONS:
                notes.pop(key, None)
    return json.dumps(index).encode()


def _header(info: tarfile.TarInfo) -> bytes:
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def _padding(size: int) -> bytes:
    return b"\0" * (-size % _BLOCK)


def _member(info: tarfile.TarInfo, data: bytes) -> Iterator[bytes]:
    info.size = len(data)
    yield _header(info)
    yield data + _padding(len(data))


def _passed(tar: tarfile.TarFile, info: tarfile.TarInfo) -> Iterator[bytes]:
    yield _header(info)
    if not info.isreg() or info.size == 0:
        return
    member = tar.extractfile(info)
    assert member is not None  # a regular file
    left = info.size
    with member:
        while left > 0:
            chunk = member.read(min(_CHUNK, left))
            if not chunk:
                raise CapsuleInvalid(f"{_WHAT} is truncated at {_name(info)!r}", hint=_HINT)
            left -= len(chunk)
            yield chunk
    yield _padding(info.size)
