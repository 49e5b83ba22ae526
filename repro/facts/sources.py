"""Where a replay will find each declared input of a run: here (the data under the data root hashes as
recorded), in the capsule, in the store, in the shared data remote, or nowhere (with the command that
would make it available). Core data only; `repro show` and `repro replay` say it in words.

The kinds are plain strings so that other sources (a DVC remote, with its name in ``remote``) add
a kind without changing the ones here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from repro.facts import hostpaths
from repro.store.capsule import DataInput, Record
from repro.store.datablobs import CAPSULE, DATA_REMOTE, STORE, BlobRoots, ReadBlob
from repro.store.statcache import HashCache
from repro.store.treehash import hash_tree
from repro.units import plural

HERE = "here"  # the data root holds it as recorded
NOWHERE = "nowhere"
DVC = "dvc"  # not kept as blobs, tracked by DVC: a replay fetches it from the DVC remote ``remote``
CARRIED = (CAPSULE, STORE, DATA_REMOTE)  # kinds a replay places from blobs
__all__ = [
    "CAPSULE", "CARRIED", "DATA_REMOTE", "DVC", "HERE", "NOWHERE", "STORE", "InputSource", "locate_inputs",
]  # fmt: skip


@dataclass
class InputSource:
    """Where one declared input will come from in a replay."""

    path: str  # the input, relative to the project root
    kind: str  # HERE, CAPSULE, STORE, DATA_REMOTE, NOWHERE (other modules may add kinds)
    files: int = 0
    size: int = 0
    present: bool = False  # something is at the path on this host (it differs when kind is not HERE)
    location: str | None = None  # the directory or file it is found in
    remote: str | None = None  # the remote's name, for kinds that have one
    missing: list[str] = field(default_factory=list)  # files no source holds (kind NOWHERE)
    fix: str | None = None  # the command that would make it available (kind NOWHERE)
    refused: str | None = None  # why the host's path is never shown to a replay (`hostpaths.refusal`)
    read: bool = False  # recorded because the run read it, not declared (`DataInput.read`)

    def describe(self) -> str:
        """``data/train (120 files): in the capsule``: one line for people."""
        read = ", read, not declared" if self.read else ""
        head = f"{self.path} ({plural(self.files, 'file')}{read})"
        if self.kind == HERE:
            return f"{head}: here"
        differs = "the host's copy differs" if self.present else "absent here"
        if self.kind == NOWHERE:
            tail = f"; {self.fix}" if self.fix else ""
            return f"{head}: nowhere ({differs}, {plural(len(self.missing), 'file')} not kept){tail}"
        if self.kind == DVC:
            named = f"the DVC remote `{self.remote}`" if self.remote else "the default DVC remote"
            return f"{head}: in {named}, fetched through DVC ({differs})"
        where = {CAPSULE: "in the capsule", STORE: "in the store", DATA_REMOTE: "in the data remote"}
        said = where.get(self.kind, f"in {self.kind}" + (f" remote {self.remote}" if self.remote else ""))
        shown = f" {self.location}" if self.location and self.kind == DATA_REMOTE else ""
        return f"{head}: {said}{shown} ({differs})"


def locate_inputs(
    record: Record,
    data_root: Path,
    roots: BlobRoots,
    read_blob: ReadBlob,
    cache: HashCache | None = None,
) -> list[InputSource]:
    """For each declared input of ``record``: where a replay with data under ``data_root`` and blobs
    in ``roots`` will find it.

    Raises:
        CapsuleInvalid: an input's manifest blob is missing or malformed.
    """
    found = []
    for item in record.data.inputs:
        refused = hostpaths.refusal(data_root, item.path)
        source = _locate(record, item, data_root, roots, read_blob, cache, host=refused is None)
        source.refused = refused
        source.read = item.read
        found.append(source)
    return found


def shown_inputs(record: Record, data_root: Path, own: bool, cache: HashCache | None = None) -> list[str]:
    """The declared inputs of ``record`` a run started from the host's data under ``data_root`` (a
    resume) may be shown: never one under a private location (`hostpaths.refusal`); of a run from
    elsewhere (``own`` False), only one whose host copy hashes as recorded."""
    shown = []
    for item in record.data.inputs:
        if hostpaths.refusal(data_root, item.path) is not None:
            continue
        path = data_root / item.path
        if own or (path.exists() and hash_tree(path, data_root, cache=cache).digest == item.digest):
            shown.append(item.path)
    return shown


def _locate(
    record: Record,
    item: DataInput,
    data_root: Path,
    roots: BlobRoots,
    read_blob: ReadBlob,
    cache: HashCache | None,
    host: bool = True,
) -> InputSource:
    """Where ``item`` comes from; ``host``: whether the host's path may be read at all."""
    path = data_root / item.path
    present = host and (path.exists() or path.is_symlink())
    count = item.count or len(item.files)
    if present and hash_tree(path, data_root, cache=cache).digest == item.digest:
        return InputSource(item.path, HERE, count, item.size, True, str(data_root))
    kinds: list[str] = []
    locations: dict[str, str] = {}
    missing: list[str] = []
    for entry in item.entries(read_blob):
        found = roots.find(entry.hash) if entry.link is None else None
        if found is None:
            missing.append(entry.path)
            continue
        kind, blob = found
        if kind not in kinds:
            kinds.append(kind)
            locations[kind] = str(blob.parents[2])
    if missing and item.dvc:
        remote = next((source.remote for source in item.dvc if source.remote), None)
        return InputSource(item.path, DVC, count, item.size, present, remote=remote)
    if missing:
        fix = f"run `repro export {record.id} --with-data` where the data is, and replay that capsule"
        return InputSource(item.path, NOWHERE, count, item.size, present, None, None, missing, fix)
    kind = kinds[0] if kinds else NOWHERE  # an empty input: nothing to place
    if kind == NOWHERE:
        return InputSource(item.path, NOWHERE, count, item.size, present, fix="recreate the empty input")
    return InputSource(item.path, kind, count, item.size, present, locations[kind])
