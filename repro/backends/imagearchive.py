"""A capsule's image archive (``docker save``) read and rebuilt without an engine.

The archive is a stranger's file. Loaded as it is, its ``manifest.json`` ``RepoTags``, its legacy
``repositories`` file and an OCI ``index.json``'s name annotations would make the engine tag images
(move ``repro-base:bookworm`` to the archive's image, say, so that every later build starts from
it); and an engine cleans member names as it extracts, so ``x/../manifest.json`` would replace the
manifest repro checked. So repro never hands the engine the stranger's archive. `read_index` reads
it whole first: every member name must be in canonical form (`limits.member_name_problem`) and
appear once; a link is accepted only when it names a canonical regular member of the same archive
(newer ``docker save`` writes the legacy ``<id>/layer.tar`` entries that way), resolved here; any
other kind of member is refused. It finds the images by their ids (the sha256 of each image's config,
what the engine names the image after loading it). `rebuilt` then writes a new archive holding only
the wanted image's config and layers, under names repro chose, and a manifest with no name in it.
The engine checks each layer against the config, so an image that loads under the recorded id is
the recorded image.

This module imports no docker; ``repro.backends.docker.archive`` talks to the engine.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from repro.errors import CapsuleInvalid
from repro.runtime.contract import parse_json
from repro.store import limits

MANIFEST = "manifest.json"
CONFIG_NAME = "config.json"  # what `rebuilt` names the image's config
MAX_MANIFEST_BYTES = 1 << 20  # one short JSON entry per image: a few hundred bytes each
MAX_CONFIG_BYTES = 16 << 20  # an image config is a few kilobytes
MAX_IMAGES = 64  # images in one archive (repro saves one)
MAX_LAYERS = 1024  # layers of one image (the engine's own limit is 127)
_CHUNK = 1 << 20
_BLOCK = tarfile.BLOCKSIZE
_HINT = "the capsule's image archive was replaced or damaged; do not replay it"
_WHAT = "the capsule's image archive"


def layer_name(index: int) -> str:
    """What `rebuilt` names the ``index``-th distinct layer."""
    return f"layers/{index}.tar"


@dataclass(frozen=True)
class Image:
    """One image of an archive: the regular members holding its config and its layers, in order."""

    config: str
    layers: tuple[str, ...]


@dataclass(frozen=True)
class ArchiveIndex:
    """The images an archive holds, by id."""

    images: dict[str, Image]

    @property
    def configs(self) -> dict[str, str]:
        """Image id → the member holding its config."""
        return {image_id: image.config for image_id, image in self.images.items()}


def _refuse(message: str) -> CapsuleInvalid:
    return CapsuleInvalid(f"{_WHAT}: {message}", hint=_HINT)


def _name(info: tarfile.TarInfo) -> str:
    """The member's name, checked: canonical form (a directory's one trailing ``/`` aside).

    Raises:
        CapsuleInvalid: a name not in canonical form.
    """
    name = info.name[:-1] if info.isdir() and info.name.endswith("/") else info.name
    problem = limits.member_name_problem(name)
    if problem is not None:
        raise _refuse(f"member {name[:200]!r} {problem}: not a name in canonical form")
    return name


def _kind(info: tarfile.TarInfo) -> str:
    if info.isreg():
        return "file"
    if info.isdir():
        return "dir"
    if info.issym() or info.islnk():
        return "link"
    raise _refuse(f"member {info.name[:200]!r} is a special file")


def _target(name: str, info: tarfile.TarInfo) -> str:
    """The member a link names: a symlink's target is relative to the link's folder, a hard link's to
    the archive's root.

    Raises:
        CapsuleInvalid: an absolute target, or one outside the archive.
    """
    link = info.linkname
    if not link or link.startswith("/"):
        raise _refuse(f"link {name!r} points outside the archive ({link[:200]!r})")
    if info.islnk():
        return link
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(name), link))
    if joined == ".." or joined.startswith("../"):
        raise _refuse(f"link {name!r} points outside the archive ({link[:200]!r})")
    return joined


@dataclass
class _Members:
    """An archive's members by canonical name: regular files, and links resolved to them."""

    files: dict[str, tarfile.TarInfo]
    links: dict[str, str]  # link name → the regular member it names

    def regular(self, name: str, what: str) -> str:
        """The regular member ``name`` is or links to.

        Raises:
            CapsuleInvalid: no such member.
        """
        resolved = self.links.get(name, name)
        if resolved not in self.files:
            raise _refuse(f"{MANIFEST} names a missing {what} {name[:200]!r}")
        return resolved


def _members(tar: tarfile.TarFile) -> _Members:
    """Every member read and checked: names canonical and unique, links to regular members only.

    Raises:
        CapsuleInvalid: as `read_index`.
    """
    seen: set[str] = set()
    files: dict[str, tarfile.TarInfo] = {}
    targets: dict[str, str] = {}
    for info in tar.getmembers():
        name = _name(info)
        if name in seen:
            raise _refuse(f"member {name!r} appears twice")
        seen.add(name)
        kind = _kind(info)
        if kind == "file":
            files[name] = info
        elif kind == "link":
            targets[name] = _target(name, info)
    for name, target in targets.items():
        problem = limits.member_name_problem(target)
        if problem is not None or target not in files:
            raise _refuse(f"link {name!r} names {target[:200]!r}, not a regular member of the archive")
    return _Members(files, targets)


def _read_small(tar: tarfile.TarFile, info: tarfile.TarInfo, bound: int) -> bytes:
    if info.size > bound:
        raise _refuse(f"{info.name!r} is larger than {bound >> 10} KiB")
    member = tar.extractfile(info)
    assert member is not None  # a regular file
    with member:
        return member.read()


def _manifest(raw: bytes) -> list[dict[str, Any]]:
    try:
        entries = parse_json(raw)
    except (ValueError, RecursionError) as e:
        raise _refuse(f"{MANIFEST} is not JSON") from e
    ok = isinstance(entries, list) and len(entries) <= MAX_IMAGES
    if not ok or not all(_is_entry(e) for e in entries):
        raise _refuse(f"{MANIFEST} is not a list of images")
    return list(entries)


def _is_entry(entry: Any) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("Config"), str):
        return False
    layers = entry.get("Layers", [])
    return isinstance(layers, list) and len(layers) <= MAX_LAYERS and all(isinstance(x, str) for x in layers)


def read_index(stream: IO[bytes]) -> ArchiveIndex:
    """The images ``stream`` (a seekable ``docker save`` archive) holds, by id: each config's sha256.

    Raises:
        CapsuleInvalid: not a tar, a member name not in canonical form or twice, a link to anything
            but a regular member, a special file, no manifest, a malformed manifest, a missing or
            oversized member.
    """
    try:
        with tarfile.open(fileobj=stream, mode="r:") as tar:
            members = _members(tar)
            if MANIFEST not in members.files or MANIFEST in members.links:
                raise _refuse(f"it has no {MANIFEST} (a regular file): it names no image")
            images: dict[str, Image] = {}
            for entry in _manifest(_read_small(tar, members.files[MANIFEST], MAX_MANIFEST_BYTES)):
                config = members.regular(entry["Config"], "config")
                layers = tuple(members.regular(layer, "layer") for layer in entry.get("Layers", []))
                digest = hashlib.sha256(_read_small(tar, members.files[config], MAX_CONFIG_BYTES)).hexdigest()
                images[f"sha256:{digest}"] = Image(config, layers)
    except (tarfile.TarError, EOFError) as e:
        raise _refuse(f"it is not a readable tar: {e}") from e
    return ArchiveIndex(images)


def rebuilt(stream: IO[bytes], image: Image) -> Iterator[bytes]:
    """A new archive to load: ``image``'s config and layers (read from ``stream``, the archive
    `read_index` found it in) under `CONFIG_NAME` and `layer_name`, and a manifest naming them and
    nothing else (no tag). ``stream`` is read front to back once; memory stays at one chunk.

    Raises:
        CapsuleInvalid: the archive is not a readable tar, holds a name not in canonical form, or
            no longer holds a member ``image`` names.
    """
    distinct = list(dict.fromkeys(image.layers))
    names = {image.config: CONFIG_NAME, **{layer: layer_name(i) for i, layer in enumerate(distinct)}}
    manifest = [{"Config": CONFIG_NAME, "Layers": [names[layer] for layer in image.layers]}]
    yield from _member(MANIFEST, json.dumps(manifest).encode())
    written: set[str] = set()
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
                if name in names and info.isreg() and name not in written:
                    written.add(name)
                    yield from _copied(tar, info, names[name])
    except (tarfile.TarError, EOFError) as e:
        raise _refuse(f"it is not a readable tar: {e}") from e
    gone = [name for name in names if name not in written]
    if gone:
        raise _refuse(f"it no longer holds {gone[0][:200]!r} (it changed while it was read)")
    yield b"\0" * (2 * _BLOCK)  # the end-of-archive marker


def _header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, 0
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def _padding(size: int) -> bytes:
    return b"\0" * (-size % _BLOCK)


def _member(name: str, data: bytes) -> Iterator[bytes]:
    yield _header(name, len(data))
    yield data + _padding(len(data))


def _copied(tar: tarfile.TarFile, info: tarfile.TarInfo, name: str) -> Iterator[bytes]:
    yield _header(name, info.size)
    if info.size == 0:
        return
    member = tar.extractfile(info)
    assert member is not None  # a regular file
    left = info.size
    with member:
        while left > 0:
            chunk = member.read(min(_CHUNK, left))
            if not chunk:
                raise _refuse(f"it is truncated at {info.name[:200]!r}")
            left -= len(chunk)
            yield chunk
    yield _padding(info.size)
