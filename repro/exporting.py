"""`repro export`: a run as one capsule tar, optionally carrying its environment image."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from repro import signing
from repro.capsule import pack
from repro.errors import UsageError
from repro.signing import SigningKey
from repro.store import LoadedRun


@dataclass
class Exported:
    """What an export wrote."""

    path: Path
    size: int
    image_size: int | None = None  # bytes of the image archive inside, when carried
    key_id: str | None = None  # the key it was signed with, when signed


def export_run(
    loaded: LoadedRun, dest: Path, with_image: bool = False, key: SigningKey | None = None
) -> Exported:
    """Write ``loaded`` as a capsule tar at ``dest``; with ``with_image``, its image goes inside;
    with ``key``, a SIGNATURE member seals its SHA256SUMS.

    Raises:
        UsageError: ``with_image`` for a run that recorded no image (the local backend).
        BackendUnavailable: no Docker engine answers. NotFoundError: the engine lost the image.
        CapsuleInvalid: a blob the record names is missing from the store.
    """
    image = loaded.record.deps.image
    signer = functools.partial(signing.sign, key) if key is not None else None
    key_id = key.id if key is not None else None
    if not with_image:
        pack(loaded.record, loaded.blob_path, dest, signer=signer)
        return Exported(dest, dest.stat().st_size, key_id=key_id)
    if image is None or not image.id:
        raise UsageError(
            f"run {loaded.record.id} ran on the {loaded.record.backend.name} backend: "
            "it has no image to carry",
            hint="export it without --with-image, or run it with --backend docker",
        )
    from repro.backends.docker import save_image

    dest.parent.mkdir(parents=True, exist_ok=True)
    archive = dest.with_name(f".{dest.name}.image-{os.getpid()}.tar")
    try:
        image_size = save_image(image.id, image.tag, archive)
        pack(loaded.record, loaded.blob_path, dest, image_archive=archive, signer=signer)
    finally:
        archive.unlink(missing_ok=True)
    return Exported(dest, dest.stat().st_size, image_size, key_id)
