"""The store's budget (``store.max_bytes``): traced runs' checkpoint copies and output blobs within it.

Only the bytes the store keeps as a courtesy count and may go: a traced run's checkpoint copies
(``CheckpointInfo.blob``) and the outputs' bytes (``FileEntry.stored``). Code, data manifests,
logs, metrics and RNG states are what make a record a record: they never go and do not count.
When the kept bytes are over the budget, the oldest go first (the oldest run first, its
earliest checkpoint first, checkpoints before outputs), never the latest of a run: a run's last
checkpoint copy, nor the copy of an output path from the newest run that wrote it. An evicted
blob is marked in its record as not kept, the way an output over ``store.max_output_bytes`` is
(``stored: false``; a checkpoint's ``blob: null``), and a blob leaves the disk only once no record
still keeps it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from repro.errors import ReproError
from repro.store import atomic
from repro.store.record import CheckpointInfo, FileEntry, Record
from repro.store.runs import Store


@dataclass
class Freed:
    """What a pass over the budget removed (or would remove): bytes and files, and where from."""

    bytes: int = 0
    files: int = 0
    kept_bytes: int = 0  # what the budget counts, after the pass
    runs: list[str] = field(default_factory=list)  # records marked


@dataclass
class _Candidate:
    run: str
    digest: str
    item: FileEntry | CheckpointInfo


def _candidates(records: dict[str, Record]) -> Iterator[_Candidate]:
    """Every evictable blob reference, oldest first, the latest of each run left out."""
    newest_writer: dict[str, str] = {}
    for run_id, record in records.items():  # oldest run first: the last one seen is the newest
        for entry in record.results.outputs:
            if entry.stored and entry.link is None:
                newest_writer[entry.path] = run_id
    for run_id, record in records.items():
        copies = sorted((c for c in record.results.checkpoints if c.blob), key=lambda c: c.step)
        for info in copies[:-1]:  # the run's latest checkpoint copy stays
            assert info.blob is not None
            yield _Candidate(run_id, info.blob, info)
        for entry in record.results.outputs:
            if entry.stored and entry.link is None and newest_writer.get(entry.path) != run_id:
                yield _Candidate(run_id, entry.hash, entry)


def _size(store: Store, digest: str) -> int:
    try:
        return os.stat(store.blob_path(digest)).st_size
    except OSError:
        return 0


def _counted(store: Store, records: dict[str, Record]) -> tuple[dict[str, int], dict[str, int]]:
    """The blobs the budget counts (checkpoint copies and kept outputs): digest -> size, and how
    many references to each the records hold."""
    sizes: dict[str, int] = {}
    refs: dict[str, int] = {}
    for record in records.values():
        digests = [c.blob for c in record.results.checkpoints if c.blob]
        digests += [e.hash for e in record.results.outputs if e.stored and e.link is None]
        for digest in digests:
            if digest not in sizes:
                sizes[digest] = _size(store, digest)
            refs[digest] = refs.get(digest, 0) + 1
    return sizes, refs


def enforce(store: Store, max_bytes: int | None, dry_run: bool = False) -> Freed:
    """Bring the counted bytes within ``max_bytes`` (None: no budget); records first, then blobs."""
    records: dict[str, Record] = {}
    for run_id in store.run_ids():  # ids sort by time: oldest first
        try:
            records[run_id] = store.load_run(run_id).record
        except ReproError:  # an incomplete or unreadable run is `repro gc`'s other business
            continue
    counted, refs = _counted(store, records)
    total = sum(counted.values())
    freed = Freed(kept_bytes=total)
    if max_bytes is None or total <= max_bytes:
        return freed
    evicted: set[str] = set()
    changed: set[str] = set()
    for candidate in _candidates(records):
        if total <= max_bytes:
            break
        if isinstance(candidate.item, FileEntry):
            candidate.item.stored = False
        else:
            candidate.item.blob = None
        changed.add(candidate.run)
        evicted.add(candidate.digest)
        refs[candidate.digest] -= 1
        if refs[candidate.digest] == 0:  # no record keeps these bytes any more
            total -= counted[candidate.digest]
    if not dry_run:
        for run_id in sorted(changed):  # the records say "not kept" before their bytes go
            atomic.write_bytes(store.run_dir(run_id).record, store.dump(records[run_id]))  # lists as blobs
    still_needed = set().union(*(r.blobs() for r in records.values()))
    for digest in sorted(evicted - still_needed):
        path = store.blob_path(digest)
        size = _size(store, digest)
        if not dry_run:
            path.unlink(missing_ok=True)
        freed.bytes += size
        freed.files += 1
    freed.runs = sorted(changed)
    freed.kept_bytes = total
    return freed
