"""The images this store's runs made: the only images `repro gc --images` may remove.

A Docker engine is shared by projects, stores and people. repro's labels are copied into every
image built on top of a repro image, and an image loaded from a capsule carries whatever labels
its author wrote, so gc never asks the engine which images look like repro's. Instead each run
notes here, by id, the image it ran in and whether it made it (built or loaded it) or found it
there (someone else's). An image is unused when this store made it and no run still in the
store refers to it; the engine side (`repro.backends.docker.gc.remove_images`) then spares the
base image, images built on it, images tagged outside ``repro-env`` and images in use.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from repro.errors import ReproError
from repro.store import atomic
from repro.store.limits import is_image_id
from repro.store.record import Record
from repro.store.runs import Store

LEDGER = "images.jsonl"


@dataclass(frozen=True)
class ImageUse:
    """One use of an image by this store: which image, by which run, and whether the store made it."""

    id: str
    run: str | None  # None: `repro build`, which no run asked for
    made: bool  # built or loaded by this use; False: it was in the engine already


def note(store_dir: Path, use: ImageUse) -> None:
    """Append ``use`` to the store's ledger. A note lost to a full disk only means gc leaves that
    image alone."""
    line = (json.dumps(asdict(use), sort_keys=True) + "\n").encode()
    with contextlib.suppress(OSError):
        fd = os.open(store_dir / LEDGER, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)  # one short write in append mode: lines of concurrent runs never mix
        finally:
            os.close(fd)


def uses(store_dir: Path) -> list[ImageUse]:
    """Every use the ledger holds, oldest first; unreadable lines are skipped."""
    try:
        lines = (store_dir / LEDGER).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    found: list[ImageUse] = []
    for line in lines:
        try:
            data = json.loads(line)
            use = ImageUse(str(data["id"]), data.get("run"), bool(data["made"]))
        except (ValueError, KeyError, TypeError):
            continue
        if is_image_id(use.id):
            found.append(use)
    return found


def unused(store: Store) -> list[str]:
    """Ids of the images this store made that no run still in the store refers to, oldest first."""
    wanted = needed(store)
    made = dict.fromkeys(use.id for use in uses(store.dir) if use.made)
    return [image_id for image_id in made if image_id not in wanted]


def needed(store: Store) -> set[str]:
    """Ids of the images a run still in the store uses (its notes, or its sealed record)."""
    alive = set(store.run_ids())
    return {use.id for use in uses(store.dir) if use.run in alive} | _recorded(store, alive)


def _recorded(store: Store, run_ids: set[str]) -> set[str]:
    """The image ids the sealed records of ``run_ids`` name (an imported run notes nothing)."""
    found: set[str] = set()
    for run_id in sorted(run_ids):
        try:
            record: Record = store.load_run(run_id).record
        except ReproError:
            continue  # unsealed runs count through their notes
        if record.deps.image is not None and record.deps.image.id:
            found.add(record.deps.image.id)
    return found


def forget(store_dir: Path, image_ids: set[str]) -> None:
    """Drop the uses of ``image_ids`` (removed from the engine) from the ledger."""
    if not image_ids:
        return
    kept = [use for use in uses(store_dir) if use.id not in image_ids]
    data = "".join(json.dumps(asdict(use), sort_keys=True) + "\n" for use in kept).encode()
    with contextlib.suppress(OSError):  # a stale line is harmless: the engine says the image is gone
        atomic.write_bytes(store_dir / LEDGER, data)
