"""A run's environment image through the registry: pushed as an ordinary OCI image manifest (the one
`docker pull` and skopeo read), pulled back by digest into the archive a capsule carries.

Pushed from `docker save` of the recorded image id: its config (whose SHA-256 is the image id) and
its uncompressed layers, each once; the manifest is the same bytes for every run of that image, so
it is uploaded once and shared by them all. Pulled only by the digest the run's artifact names and
only from the repository the user named, every blob checked against its digest, the config against
the recorded image id, and written as a `docker save` archive that replay loads as it loads a
capsule's (`repro.backends.docker.archive`).
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.errors import CapsuleInvalid
from repro.share.client import Registry
from repro.store.hashing import sha256_file
from repro.store.limits import is_digest

IMAGE_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPES = {b"\x1f\x8b": "application/vnd.oci.image.layer.v1.tar+gzip"}  # by magic; else plain tar
PLAIN_LAYER = "application/vnd.oci.image.layer.v1.tar"
MAX_IMAGE_LAYERS = 1000


@dataclass
class PushedImage:
    digest: str  # of its manifest
    size: int  # bytes of its config and layers
    uploaded: int  # of them sent now


def _unpacked(archive: Path, into: Path) -> tuple[Path, list[Path]]:
    """The config file and the layer files of the one image of a `docker save` archive, extracted.

    Raises:
        CapsuleInvalid: not a one-image archive.
    """
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    listed = json.loads((into / "manifest.json").read_text())
    if not isinstance(listed, list) or len(listed) != 1:
        raise CapsuleInvalid(f"{archive.name} holds no single image")
    return into / listed[0]["Config"], [into / layer for layer in listed[0]["Layers"]]


def push_image(registry: Registry, image_id: str, tag: str | None, work: Path) -> PushedImage:
    """Push the engine's image ``image_id`` to ``registry``'s repository by digest, sending only what it
    lacks; its manifest's digest.

    Raises:
        BackendUnavailable: no Docker engine answers. NotFoundError: the engine lacks the image.
        CapsuleInvalid: the saved config is not the image id. RegistryRefused, RegistryUnavailable.
    """
    from repro.backends.docker.archive import save_image

    archive = work / "image.tar"
    save_image(image_id, tag, archive)
    config, layers = _unpacked(archive, work / "image")
    archive.unlink()
    config_digest = "sha256:" + sha256_file(config)
    if config_digest != image_id:
        raise CapsuleInvalid(f"the engine saved image {config_digest[:19]} for {image_id[:19]}")
    blobs = [
        (config, config_digest, CONFIG_TYPE),
        *((p, "sha256:" + sha256_file(p), _layer_type(p)) for p in layers),
    ]
    sent = 0
    for path, digest, _ in blobs:
        if not registry.has_blob(digest):
            with open(path, "rb") as f:
                registry.put_blob(digest, path.stat().st_size, f)
            sent += path.stat().st_size
    body = image_manifest([(digest, path.stat().st_size, kind) for path, digest, kind in blobs])
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    if not registry.has_manifest(digest):
        registry.put_manifest(digest, body, IMAGE_TYPE)
    return PushedImage(digest, sum(path.stat().st_size for path, _, _ in blobs), sent)


def _layer_type(path: Path) -> str:
    with open(path, "rb") as f:
        return LAYER_TYPES.get(f.read(2), PLAIN_LAYER)


def image_manifest(blobs: list[tuple[str, int, str]]) -> bytes:
    """An OCI image manifest for a config and its layers (digest, size, media type); deterministic."""
    (config, config_size, config_type), layers = blobs[0], blobs[1:]
    doc: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": IMAGE_TYPE,
        "config": {"mediaType": config_type, "digest": config, "size": config_size},
        "layers": [{"mediaType": kind, "digest": digest, "size": size} for digest, size, kind in layers],
    }
    return json.dumps(doc, indent=2, sort_keys=True).encode()


def pull_image(registry: Registry, image_id: str, scratch: Path) -> Path:
    """The image ``registry``'s reference names (by digest), as a `docker save` archive under
    ``scratch``; its config must be ``image_id``.

    Raises:
        CapsuleInvalid: a manifest that is not an image's, a blob that does not match its digest, a
            config that is not the recorded image. NotFoundError, RegistryRefused, RegistryUnavailable.
    """
    try:
        doc = json.loads(registry.get_manifest())
    except ValueError as e:
        raise CapsuleInvalid(f"the image manifest at {registry.ref} is not JSON") from e
    config = doc.get("config") if isinstance(doc, dict) else None
    layers = doc.get("layers") if isinstance(doc, dict) else None
    if not isinstance(config, dict) or not isinstance(layers, list) or len(layers) >= MAX_IMAGE_LAYERS:
        raise CapsuleInvalid(f"the image manifest at {registry.ref} is malformed")
    if not all(isinstance(entry, dict) for entry in layers):
        raise CapsuleInvalid(f"the image manifest at {registry.ref} is malformed")
    if config.get("digest") != image_id:
        raise CapsuleInvalid(
            f"the image {registry.ref} names is not the recorded image {image_id[:19]}",
            hint="push the run again: its image is pushed with it",
        )
    folder = scratch / "image"
    folder.mkdir()
    names: list[str] = []
    for entry in [config, *layers]:
        digest, size = str(entry.get("digest", "")), entry.get("size")
        hexa = digest.removeprefix("sha256:")
        if (
            not digest.startswith("sha256:")
            or len(hexa) != 64
            or not is_digest(hexa)
            or not isinstance(size, int)
        ):
            raise CapsuleInvalid(f"the image {registry.ref} names a malformed layer")
        name = hexa + (".json" if entry is config else ".tar")  # a file name of hex digits only
        if not (folder / name).exists():
            registry.get_blob(digest, size, folder / name)
        names.append(name)
    # nameless: the image is loaded under its checked id, never under a name the record carries
    listed = [{"Config": names[0], "RepoTags": None, "Layers": names[1:]}]
    (folder / "manifest.json").write_text(json.dumps(listed))
    archive = scratch / "docker-image.tar"
    with tarfile.open(archive, "w") as tar:
        for name in ["manifest.json", *dict.fromkeys(names)]:
            tar.add(folder / name, arcname=name)
            if name != "manifest.json":
                (folder / name).unlink()
    return archive
