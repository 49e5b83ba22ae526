"""Where a replay will find each declared input of a run: here (the data under the data root hashes as
recorded), in the capsule, in the store, in the shared data remote, or nowhere (with the command that
would make it available). Core data only; `repro show` and `repro replay` say it in words.

The kinds are plain strings so that other sources (a DVC remote, with its name in ``remote``) add
a kind without changing the ones here.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from repro.backends.base import OnEvent
from repro.errors import CapsuleInvalid, DataDrift, DataUnavailable, from_os_error
from repro.facts import hostpaths
from repro.facts.data import Drift, check_data
from repro.integrations import dvc as dvc_data
from repro.rerun.request import ReplayRequest, say
from repro.store import datablobs
from repro.store.datablobs import CAPSULE, DATA_REMOTE, STORE, BlobRoots, ReadBlob
from repro.store.record import DataInput, FileEntry, Record
from repro.store.runs import LoadedRun, Store
from repro.store.statcache import HashCache
from repro.store.treehash import TreeDigest, hash_tree
from repro.units import plural

if TYPE_CHECKING:
    from repro.config import Settings

HERE = "here"  # the data root holds it as recorded
NOWHERE = "nowhere"
DVC = "dvc"  # not kept as blobs, tracked by DVC: a replay fetches it from the DVC remote ``remote``
CARRIED = (CAPSULE, STORE, DATA_REMOTE)  # kinds a replay places from blobs
# Where carried data lies, in words: ``in the capsule`` (`InputSource.describe`), ``the copy carried in
# the capsule`` (a replay's note).
_PLACES = {
    CAPSULE: ("carried in", "the capsule"),
    STORE: ("kept in", "the store"),
    DATA_REMOTE: ("in", "the data remote"),
}
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
    # The host's copy as hashed to judge it (None: not read there), so that it is hashed once.
    tree: TreeDigest | None = field(default=None, repr=False, compare=False)

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
        place = _PLACES[self.kind][1] if self.kind in _PLACES else None
        said = (
            f"in {place}" if place else f"in {self.kind}" + (f" remote {self.remote}" if self.remote else "")
        )
        shown = f" {self.location}" if self.location and self.kind == DATA_REMOTE else ""
        return f"{head}: {said}{shown} ({differs})"


def locate_inputs(
    record: Record,
    data_root: Path,
    roots: BlobRoots,
    read_blob: ReadBlob,
    cache: HashCache | None = None,
    hashed: Mapping[str, TreeDigest] | None = None,
) -> list[InputSource]:
    """For each declared input of ``record``: where a replay with data under ``data_root`` and blobs
    in ``roots`` will find it (``hashed``: inputs already hashed there, by path, not hashed again).

    Raises:
        CapsuleInvalid: an input's manifest blob is missing or malformed.
    """
    found = []
    for item in record.data.inputs:
        refused = hostpaths.refusal(data_root, item.path)
        tree = (hashed or {}).get(item.path) if refused is None else None
        source = _locate(record, item, data_root, roots, read_blob, cache, refused is None, tree)
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
    hashed: TreeDigest | None = None,
) -> InputSource:
    """Where ``item`` comes from; ``host``: whether the host's path may be read at all; ``hashed``:
    the host's copy, already hashed."""
    path = data_root / item.path
    present = host and (path.exists() or path.is_symlink())
    tree = (hashed if hashed is not None else hash_tree(path, data_root, cache=cache)) if present else None
    source = _source(record, item, data_root, roots, read_blob, present, tree)
    source.tree = tree
    return source


def _source(
    record: Record,
    item: DataInput,
    data_root: Path,
    roots: BlobRoots,
    read_blob: ReadBlob,
    present: bool,
    tree: TreeDigest | None,
) -> InputSource:
    """Where ``item`` comes from, the host's copy hashed as ``tree`` (None: absent or never read)."""
    count = item.count or len(item.files)
    if tree is not None and tree.digest == item.digest:
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


def check_recorded_data(
    original: Record,
    data_root: Path,
    store: Store,
    allow: bool,
    read_blob: Callable[[str], bytes | None],
    hashed: Mapping[str, TreeDigest] | None = None,
) -> Drift | None:
    """Hash the data the capsule names under ``data_root`` (but those ``hashed`` already); stop on
    drift unless allowed.

    Raises:
        DataDrift: the data differs and drift is not allowed.
    """
    if not original.data.inputs:
        return None
    with HashCache(store.cache_dir / "hashes.sqlite") as cache:
        drift = check_data(original.data.inputs, data_root, cache=cache, read_blob=read_blob, hashed=hashed)
    if drift and not allow:
        raise DataDrift(drift.changed, drift.missing, drift.extra)
    return drift or None


def replay_data(
    request: ReplayRequest,
    loaded: LoadedRun,
    settings: Settings,
    store: Store,
    capsule_blobs: Path | None,
    notes: list[str],
    on_event: OnEvent,
) -> tuple[Path, DataChoice]:
    """Where the replay reads each declared input: the host's data where it is as recorded, else
    blobs at hand (capsule, store, data remote: `choose_data`) or a fetch through DVC; said in the
    notes. Returns the data root and the choice.

    Raises:
        DataDrift: the data differs, nothing replaces it, and drift is not allowed.
        DataUnavailable: DVC could not fetch the recorded versions.
    """
    original = loaded.record
    data_root = (request.data_root or store.root).resolve()
    remote = datablobs.remote_root(settings.data_remote, store.root)
    roots = datablobs.blob_roots(capsule_blobs, store.dir, remote)
    data_root, hashed = _data_from_dvc(
        request, original, data_root, store, roots, loaded.read_blob, notes, on_event
    )
    data = choose_data(original, data_root, store, roots, request, loaded.read_blob, hashed)
    if data.drift:
        notes.append(data.drift.describe() + " (allowed by --allow-data-drift)")
    for note in data.notes():
        say(note, notes, on_event)
    _keep_carried(data, original, loaded.read_blob, remote or store.dir)
    return data_root, data


def _data_from_dvc(
    request: ReplayRequest,
    original: Record,
    data_root: Path,
    store: Store,
    roots: datablobs.BlobRoots,
    read_blob: Callable[[str], bytes | None],
    notes: list[str],
    on_event: OnEvent,
) -> tuple[Path, dict[str, TreeDigest]]:
    """Where the replay reads its data, and the inputs hashed there to judge it (by path: hashed
    once, `choose_data` takes them): ``data_root``; or, when DVC tracks the recorded inputs and the
    data there differs (or is absent), a scratch copy of the recorded versions fetched through DVC and
    checked against the manifest. Not with --data-root or --allow-data-drift (the user chose the data),
    nor when blobs at hand (carried in the capsule, kept in the store or the data remote) hold every
    recorded file: `choose_data` places those without a fetch.

    Raises:
        DataUnavailable: DVC could not fetch the recorded versions.
        DataDrift: what DVC fetched differs from the manifest (the files named).
    """
    if request.data_root is not None or request.allow_data_drift or not dvc_data.tracked(original):
        return data_root, {}
    with HashCache(store.cache_dir / "hashes.sqlite") as cache:
        hashed = _hash_inputs(original, data_root, cache)
        if not check_data(original.data.inputs, data_root, cache=cache, read_blob=read_blob, hashed=hashed):
            return data_root, hashed
        blobs = datablobs.data_blobs(original, read_blob)
        if blobs and all(roots.find(digest) for digest in blobs):
            return data_root, hashed
        scratch = Path(tempfile.mkdtemp(prefix="repro-data-", dir=store.cache_dir))
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        fetched = dvc_data.fetch_inputs(original, scratch, data_root)
        hashed = _hash_inputs(original, scratch, cache)
        drift = check_data(original.data.inputs, scratch, cache=cache, read_blob=read_blob, hashed=hashed)
    if drift:
        where = ", ".join(f"`{r}`" for r in fetched.remotes)
        raise DataDrift(
            drift.changed, drift.missing, drift.extra, what="the data DVC fetched",
            hint=f"the DVC remote {where} holds other bytes than the run read; push the recorded data again",
        )  # fmt: skip
    say(fetched.describe(), notes, on_event)
    return fetched.root, hashed


def _hash_inputs(original: Record, root: Path, cache: HashCache) -> dict[str, TreeDigest]:
    """Each declared input under ``root`` that may be read there and exists, hashed (by path)."""
    return {
        item.path: hash_tree(root / item.path, root, cache=cache)
        for item in original.data.inputs
        if hostpaths.refusal(root, item.path) is None and (root / item.path).exists()
    }


@dataclass
class DataChoice:
    """Where each declared input of a replay comes from (`choose_data`)."""

    sources: list[InputSource] = field(default_factory=list)
    drift: Drift | None = None  # the host's data differs and nothing carried replaces it (allowed)
    roots: datablobs.BlobRoots = field(default_factory=lambda: datablobs.BlobRoots(()))

    @property
    def placed(self) -> bool:
        """Whether the inputs are placed into the replay's copy (some come from blobs)."""
        return self.drift is None and any(s.kind in CARRIED for s in self.sources)

    def notes(self) -> list[str]:
        """What the replay says about the data it uses instead of the host's."""
        if not self.placed:
            return []
        return [
            f"declared data {s.path}: the host's copy {'differs' if s.present else 'is absent'}; the replay "
            f"uses the copy {' '.join(_PLACES[s.kind])}, placed read-only in its own copy of the project "
            "(the host's data is left as it is)"
            for s in self.sources
            if s.kind in CARRIED
        ]

    def shown(self, user_root: bool) -> tuple[list[str], list[str]]:
        """The declared inputs a replay reading the host's data shows its command, and one note per
        input it does not (`repro.facts.hostpaths`): an input as recorded, or one from the data root
        the user named (``user_root``); never a private location, whatever its content."""
        shown: list[str] = []
        withheld: list[str] = []
        for s in self.sources:
            if s.refused is not None:
                withheld.append(f"declared data {s.path} is not shown to the replay: {s.refused}")
            elif s.kind == HERE or (user_root and s.present):
                shown.append(s.path)
            elif s.present:
                withheld.append(
                    f"declared data {s.path} differs from the record and is not shown to the replay: "
                    "data that differs from a run from elsewhere is shown only from a directory you name "
                    "with --data-root"
                )
        return shown, withheld


def choose_data(
    original: Record,
    data_root: Path,
    store: Store,
    roots: datablobs.BlobRoots,
    request: ReplayRequest,
    read_blob: Callable[[str], bytes | None],
    hashed: Mapping[str, TreeDigest] | None = None,
) -> DataChoice:
    """Decide where each declared input comes from: the host's data where it is as recorded, else
    the blobs carried in the capsule, kept in the store or in the data remote; when an input is found
    nowhere, the host's data as before (drift stops the replay unless allowed). ``hashed``: inputs
    already hashed under ``data_root`` (by path), not hashed again.

    Raises:
        DataDrift: an input differs, no blobs replace it, and drift is not allowed.
        UsageError: the data to place is over ``request.max_data_size``.
        CapsuleInvalid: a manifest blob is missing or malformed.
    """
    if not original.data.inputs:
        return DataChoice()
    with HashCache(store.cache_dir / "hashes.sqlite") as cache:
        sources = locate_inputs(original, data_root, roots, read_blob, cache, hashed)
    _refuse_missing_read(original, sources, request)
    if any(s.kind in (NOWHERE, DVC) for s in sources):  # DVC: not fetched (--data-root, drift allowed)
        hashed = {s.path: s.tree for s in sources if s.tree is not None}  # judged here, not hashed again
        drift = check_recorded_data(original, data_root, store, request.allow_data_drift, read_blob, hashed)
        return DataChoice(sources, drift, roots)
    choice = DataChoice(sources, None, roots)
    if choice.placed:
        datablobs.check_size(sum(s.size for s in sources), request.max_data_size, "--max-data-size")
    return choice


def _refuse_missing_read(original: Record, sources: list[InputSource], request: ReplayRequest) -> None:
    """Raises: DataUnavailable: a file the run read (not declared) is neither here as recorded nor
    kept anywhere, and drift is not allowed: named before anything runs, with how to supply it."""
    read = {item.path for item in original.data.inputs if item.read}
    missing = [s for s in sources if s.kind == NOWHERE and s.path in read]
    if not missing or request.allow_data_drift:
        return
    first = missing[0]
    state = "differs here" if first.present else "is absent here"
    more = (
        f" (and {len(missing) - 1} more: {', '.join(s.path for s in missing[1:4])})"
        if len(missing) > 1
        else ""
    )
    raise DataUnavailable(
        f"the run read {first.path} (not declared data), it {state}{more}, and no copy is kept here (over "
        "store.max_input_bytes when it ran, or a capsule exported without --with-data)",
        hint=f"put the recorded {first.path} back in the project, or export the run with --with-data where "
        f"it is and replay that capsule; declare it with --data {first.path} when you run",
    )


def _keep_carried(
    data: DataChoice, original: Record, read_blob: Callable[[str], bytes | None], into: Path
) -> None:
    """Keep the data a capsule carried, by hash, where the next replay of the run finds it: the data
    remote when there is one, else the store (a hard link where the file systems allow)."""
    if not data.placed:
        return
    for digest in sorted(datablobs.data_blobs(original, read_blob)):
        found = data.roots.find(digest)
        if found is None or found[0] != CAPSULE:
            continue
        try:
            datablobs.put(found[1], digest, into)
        except OSError as e:
            raise from_os_error(e, into) from e


def place_data(
    data: DataChoice,
    original: Record,
    data_root: Path,
    root: Path,
    read_blob: Callable[[str], bytes | None],
    limit: int,
) -> None:
    """Write every declared input at its recorded path in the replay's copy of the project ``root``:
    from blobs where the host's copy differs or is absent, from the host where it is as recorded;
    each file checked against the record's manifest.

    Raises:
        CapsuleInvalid: an unsafe path, a blob or file that does not match the manifest, data over
            the size limit.
    """
    kinds = {s.path: s.kind for s in data.sources}
    for item, files in datablobs.inputs_files(original, read_blob):
        entries = datablobs.safe_entries(item, files)
        datablobs.clear(root, item.path)
        from_blobs = kinds.get(item.path) != HERE

        def source_of(entry: FileEntry, from_blobs: bool = from_blobs) -> Path:
            if not from_blobs:
                return data_root / entry.path
            found = data.roots.find(entry.hash)
            if found is None:
                raise CapsuleInvalid(f"data file {entry.path} is not kept as a blob")
            return found[1]

        datablobs.place(entries, root, source_of, limit)
