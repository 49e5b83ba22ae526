"""The image a run uses, put in its record and noted in the store's image ledger."""

from __future__ import annotations

from repro.backends.base import (
    BuiltImage,
)
from repro.store import images as store_images
from repro.store.record import ImageInfo, Record
from repro.store.runs import Store


def record_image(record: Record, image: BuiltImage, store: Store) -> None:
    """Put the image a run uses in its record, and note it in the store's image ledger (what
    `repro gc --images` may remove: images this store made)."""
    record.deps.image = image_info(image, store)
    store_images.note(store.dir, store_images.ImageUse(image.id, record.id, made=not image.reused))


def image_info(image: BuiltImage, store: Store) -> ImageInfo:
    return ImageInfo(
        id=image.id,
        tag=image.tag,
        base=image.base,
        base_id=image.base_id,
        dockerfile=store.put_bytes(image.dockerfile_text.encode()) if image.dockerfile_text else None,
        template=image.template,
        reused=image.reused,
        build_seconds=image.build_seconds,
        loaded=image.loaded,
        installed_from=dict(image.installed_from),
    )
