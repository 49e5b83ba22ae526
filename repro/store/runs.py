"""The store: `.repro/` at the project root — run directories, resolving a ref, importing a capsule;
`Store` composes the blobs (`repro.store.blobs`) and the index (`repro.store.index`) with them.

Layout::

    .repro/
      runs/<id>/                a run directory (its layout: `repro.store.rundir.RunDir`)
      blobs/ab/abcdef…          content-addressed files (xxh3-128), each stored once
      index.sqlite              one row per sealed run, for `repro ls`
      cache/                    hash cache, extracted capsules, scratch directories

A blob's name is the xxh3-128 of its bytes, and a reader never takes that on trust: a run's blobs
are re-hashed against their names as they are read (`LoadedRun.read_blob`, `LoadedRun.blob_path`,
`Store.read_blob`), so a blob replaced in the store stops a replay, resume or export (exit 6)
instead of being restored as code, lockfile or data manifest.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import re
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from repro.errors import CapsuleInvalid, NotFoundError, StoreConflict, UsageError
from repro.store import index
from repro.store.blobs import BlobStore, read_checked, read_list_blob, replaced_blob, write_atomic
from repro.store.capsule import IMAGE_MEMBER, RECORD_NAME, blob_member
from repro.store.hashing import hash_file
from repro.store.record import Record
from repro.store.recordio import SPILLED_LISTS, dump_record, hydrate, load_record
from repro.store.rundir import (
    DETACHED as DETACHED,  # a detached run's mark (repro/backends/slurm/detached.py)
)
from repro.store.rundir import HELPER, RunDir
from repro.store.verify import verify_tar
from repro.units import plural

STORE_DIR = ".repro"
_ID_RE = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{4}$")


def new_run_id(now: datetime | None = None) -> str:
    """A run id that sorts by time to the millisecond: ``YYYYMMDD-HHMMSS-xxxx``.

    The four hex digits are the millisecond (times 64) plus 6 random bits, so runs
    started within one second still sort in the order they started.
    """
    now = now or datetime.now(timezone.utc)
    import secrets

    suffix = (now.microsecond // 1000) * 64 + secrets.randbelow(64)
    return f"{now:%Y%m%d-%H%M%S}-{suffix:04x}"


def find_project_root(start: Path) -> Path:
    """The project root: the nearest directory upward holding `.repro/` or `repro.yaml`,
    else the enclosing git work tree, else ``start`` itself."""
    start = start.resolve()
    for d in (start, *start.parents):
        if (d / STORE_DIR).is_dir() or (d / "repro.yaml").is_file():
            return d
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d
    return start


@dataclass
class LoadedRun:
    """A sealed run, from the store or from an exported capsule."""

    record: Record
    location: Path  # the run directory, or the capsule file
    blob_root: Path  # directory holding `blobs/`
    from_capsule: bool = False
    image_archive: Path | None = None  # the capsule tar, when it carries its environment image
    sums_sha256: str | None = None  # SHA-256 of the SHA256SUMS a capsule was verified against
    attestation: bytes | None = None  # the attestation a capsule carries (`repro export --attest`)
    model_signature: bytes | None = None  # the OMS bundle a capsule carries (`--attest --format oms`)
    marked_foreign: bool = False  # the store marks it as from elsewhere (`Store.mark_foreign`)

    @property
    def foreign(self) -> bool:
        """Whether the record came from elsewhere: a capsule file, or a run the store marks so."""
        return self.from_capsule or self.marked_foreign

    checked: set[str] = field(default_factory=set, repr=False, compare=False)  # blobs re-hashed so far

    def blob_path(self, digest: str) -> Path:
        """Where a blob of the run lies, once its bytes were found to match its name (a missing blob's
        path is returned unchecked: the caller says what is missing).

        Raises:
            CapsuleInvalid: the blob's bytes do not match its name (replaced or corrupt).
        """
        path = self.blob_root / blob_member(digest)
        if digest not in self.checked and path.is_file():
            if hash_file(path) != digest:
                raise replaced_blob(digest, path)
            self.checked.add(digest)
        return path

    def read_blob(self, digest: str | None) -> bytes | None:
        """A blob's bytes, checked against its name; None when it is missing.

        Raises:
            CapsuleInvalid: the bytes do not match the name.
        """
        if not digest:
            return None
        return read_checked(self.blob_root / blob_member(digest), digest)

    def unchecked_path(self, digest: str) -> Path:
        """Where a blob of the run lies, for a reader that checks its bytes as it reads them."""
        return self.blob_root / blob_member(digest)

    def unchecked_file(self, digest: str) -> str:
        """`unchecked_path` as a string, for a reader of thousands of blobs (`tarwriter.pack`)."""
        return f"{self.blob_root}{os.sep}{blob_member(digest)}"

    def read_lists(self) -> Record:
        """The record with the file lists it keeps as blobs read in (each blob size-bounded and
        checked against its name first); what show, diff, replay and export need.

        Raises:
            CapsuleInvalid: a list blob missing, replaced, malformed or over its bound.
        """
        return hydrate(self.record, lambda digest: read_list_blob(self.blob_root, digest))


# Openers of remote refs by scheme (``oci`` → `repro.share`), registered by the CLI: the store itself
# speaks to no network. An opener returns the run as a verified capsule, not yet in the store.
_REMOTES: dict[str, Callable[[Store, str], LoadedRun]] = {}


def is_capsule_ref(ref: str) -> bool:
    """Whether ``ref`` names a capsule file rather than a run of a store: a ``.tar`` name, or any
    file (the rule every command that takes a ref follows)."""
    return ref.endswith(".tar") or Path(ref).is_file()


def register_remote(scheme: str, opener: Callable[[Store, str], LoadedRun]) -> None:
    """Let every command that takes a run ref take ``SCHEME://…`` refs, opened by ``opener``."""
    _REMOTES[scheme] = opener


class Store:
    """The `.repro/` directory of one project."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / STORE_DIR
        self.runs_dir = self.dir / "runs"
        self.blobs = BlobStore(self.dir)
        self.blobs_dir = self.blobs.blobs_dir
        self.cache_dir = self.dir / "cache"

    @classmethod
    def open(cls, start: Path | None = None) -> Store:
        return cls(find_project_root(start or Path.cwd()))

    def ensure(self) -> None:
        for d in (self.runs_dir, self.blobs_dir, self.cache_dir):
            d.mkdir(parents=True, exist_ok=True)
        ignore = self.dir / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n")

    # ------------------------------------------------------------------ blobs (`BlobStore`)

    def blob_path(self, digest: str) -> Path:
        return self.blobs.blob_path(digest)

    def has_blob(self, digest: str) -> bool:
        return self.blobs.has_blob(digest)

    def put_bytes(self, data: bytes) -> str:
        """Store bytes once; returns their digest."""
        return self.blobs.put_bytes(data)

    def put_file(self, path: str | Path, digest: str | None = None) -> str:
        """Store a file's bytes once; returns the digest of the bytes stored (`BlobStore.put_file`)."""
        return self.blobs.put_file(path, digest)

    def put_fd(self, fd: int) -> tuple[str, int]:
        """Store the bytes of an open file once; the digest and the size stored (`BlobStore.put_fd`).

        Raises:
            OSError: the file could not be read, or the blob written (naming it).
        """
        return self.blobs.put_fd(fd)

    def read_blob(self, digest: str | None) -> bytes | None:
        """A blob's bytes, checked against its name; None when it is missing.

        Raises:
            CapsuleInvalid: the bytes do not match the name.
        """
        return self.blobs.read_blob(digest)

    def partial_blobs(self) -> list[Path]:
        """Partial blob copies whose writing process is gone (`BlobStore.partial_blobs`)."""
        return self.blobs.partial_blobs()

    def dump(self, record: Record) -> bytes:
        """The record's YAML bytes, its long file lists stored as blobs (`recordio.spilled`)."""
        return dump_record(record, self.put_bytes)

    # ------------------------------------------------------------------ runs

    def begin_run(self, run_id: str, argv: list[str]) -> Path:
        """Create the run directory with its in-progress marker."""
        self.ensure()
        run_dir = self.run_dir(run_id)
        run_dir.work.mkdir(parents=True)
        marker = {"pid": os.getpid(), "started": datetime.now(timezone.utc).isoformat(), "argv": argv}
        run_dir.running.write_text(json.dumps(marker))
        return run_dir.path

    def run_dir(self, run_id: str) -> RunDir:
        """The directory of run ``run_id`` and the paths inside it (it may not exist)."""
        return RunDir(self.runs_dir / run_id)

    def write_pending(self, record: Record, run_dir: Path, kept: dict[str, Any]) -> None:
        """Keep the record of a run being executed (and ``kept``: its output and data paths, the
        output stats before it), so a run whose repro process died can still be sealed and resumed."""
        write_atomic(RunDir(run_dir).pending_record, self.dump(record))
        write_atomic(RunDir(run_dir).pending_kept, json.dumps(kept).encode())

    def load_pending(self, run_id: str) -> tuple[Record, dict[str, Any]] | None:
        """What `write_pending` kept for an unsealed run; None when nothing was kept.

        Raises:
            CapsuleInvalid: the kept record is unreadable.
        """
        run_dir = self.run_dir(run_id)
        if not run_dir.pending_record.is_file():
            return None
        record = load_record(run_dir.pending_record.read_bytes(), self.blobs.read_list)
        try:
            kept = json.loads(run_dir.pending_kept.read_text())
        except (OSError, ValueError):
            kept = {}
        return record, kept if isinstance(kept, dict) else {}

    def has_record(self, run_id: str) -> bool:
        """Whether the run was sealed."""
        return self.run_dir(run_id).record.is_file()

    def is_running(self, run_id: str) -> bool:
        """Whether an unsealed run is still going: its repro process alive, or a detached job not ended."""
        return index.unsealed_row(self.runs_dir / run_id).status in ("running", "pending")

    def seal(self, record: Record, run_dir: Path) -> Path:
        """Write the record atomically (the run's completion mark), drop scratch files, index it."""
        layout = RunDir(run_dir)
        write_atomic(layout.record, self.dump(record))
        layout.running.unlink(missing_ok=True)
        shutil.rmtree(layout.work, ignore_errors=True)
        with contextlib.suppress(sqlite3.Error):  # the record is the truth; `rows()` indexes it later
            with self._index() as db:
                index.put(db, record)
        return run_dir

    def detached_runs(self) -> list[Path]:
        """Run directories of detached jobs not sealed yet."""
        return sorted(self.runs_dir.glob(f"*/{DETACHED}")) if self.runs_dir.is_dir() else []

    def run_ids(self) -> list[str]:
        if not self.runs_dir.is_dir():
            return []
        return sorted(p.name for p in self.runs_dir.iterdir() if _ID_RE.match(p.name))

    def load_run(self, run_id: str, lists: tuple[str, ...] = SPILLED_LISTS) -> LoadedRun:
        """A sealed run from the store, with those of the file lists it keeps as blobs named in
        ``lists`` read (all by default; `repro show` reads the outputs alone).

        Raises:
            NotFoundError: no such run, or it never completed.
            CapsuleInvalid: its record is unreadable.
        """
        run_dir = self.runs_dir / run_id
        record_path = run_dir / RECORD_NAME
        if not record_path.is_file():
            if run_dir.is_dir():
                raise NotFoundError(
                    f"run {run_id} is incomplete (it was interrupted before it was sealed)",
                    hint="`repro ls` lists complete runs; `repro gc` removes incomplete ones",
                )
            raise NotFoundError(f"no run {run_id}", hint="`repro ls` lists the runs")
        record = hydrate(load_record(record_path.read_bytes()), self.blobs.read_list, only=lists)
        loaded = LoadedRun(record, run_dir, self.dir)
        loaded.marked_foreign = self.is_foreign(run_id)
        return loaded

    def is_foreign(self, run_id: str) -> bool:
        """Whether the store marks the run as from elsewhere (`mark_foreign`)."""
        return self.run_dir(run_id).foreign.exists()

    def mark_foreign(self, run_id: str, why: str) -> None:
        """Mark a run as from elsewhere, in the store's own files (never in the record it describes).

        Written before the run's record, so a run is never seen without its mark.
        """
        run_dir = self.run_dir(run_id)
        run_dir.path.mkdir(parents=True, exist_ok=True)
        write_atomic(run_dir.foreign, json.dumps({"why": why}).encode())

    def mark_helper(self, run_id: str, why: str) -> None:
        """Mark a run as a helper execution of another command: hidden from `rows` and `latest`,
        reachable by its id. Written before the run starts, so it is never listed."""
        run_dir = self.run_dir(run_id)
        run_dir.path.mkdir(parents=True, exist_ok=True)
        write_atomic(run_dir.helper, json.dumps({"why": why}).encode())

    def listed_ids(self) -> list[str]:
        """The runs a listing shows, oldest first: all but helper executions (`mark_helper`)."""
        return [r for r in self.run_ids() if not (self.runs_dir / r / HELPER).exists()]

    def rows(self, helpers: bool = False) -> list[index.RunRow]:
        """Every run, sealed or not, oldest first; helper executions (`mark_helper`) only with ``helpers``.

        The index is only read (a full disk or a read-only store still lists); runs it
        lacks are read from their records and added to it when it can be written.
        """
        ids = self.run_ids() if helpers else self.listed_ids()
        rows: list[index.RunRow] = []
        known = index.indexed(self.dir)
        unindexed: list[Record] = []
        for run_id in ids:
            run_dir = self.runs_dir / run_id
            if run_id in known:
                rows.append(index.row_from_db(known[run_id]))
            elif (run_dir / RECORD_NAME).is_file():
                try:  # the code lists it keeps as blobs are never read here; its outputs are indexed
                    raw = (run_dir / RECORD_NAME).read_bytes()
                    record = hydrate(load_record(raw), self.blobs.read_list, only=("results.outputs",))
                except CapsuleInvalid:
                    rows.append(index.RunRow(run_id, "", "invalid", "run", "?", None, None))
                    continue
                unindexed.append(record)
                rows.append(index.row_from_record(record))
            else:
                rows.append(index.unsealed_row(run_dir))
        if unindexed:
            with contextlib.suppress(sqlite3.Error, OSError), self._index() as db:
                for record in unindexed:
                    index.put(db, record)
        return rows

    def resolve(self, ref: str, lists: tuple[str, ...] = SPILLED_LISTS) -> LoadedRun:
        """A run from a ref: id, unique id prefix, `latest`, `latest~N`, a run dir, a capsule tar, a
        remote ref whose scheme has an opener (`register_remote`: ``oci://…``);
        ``lists``: the file lists kept as blobs to read for a stored run (`load_run`).

        Raises:
            NotFoundError: nothing matches. UsageError: an ambiguous prefix.
            CapsuleInvalid: a capsule file that fails verification.
        """
        scheme, sep, _ = ref.partition("://")
        if sep and scheme in _REMOTES:
            return _REMOTES[scheme](self, ref)
        path = Path(ref)
        if is_capsule_ref(ref):
            return self.open_capsule(path)
        if path.is_dir() and (path / RECORD_NAME).is_file():
            loaded = LoadedRun(load_record((path / RECORD_NAME).read_bytes()), path, path.parent.parent)
            loaded.read_lists()
            # a run directory of another store is from elsewhere too
            mine = path.resolve().parent == self.runs_dir.resolve()
            loaded.marked_foreign = RunDir(path).foreign.exists() or not mine
            return loaded
        sealed = [r for r in self.run_ids() if (self.runs_dir / r / RECORD_NAME).is_file()]
        m = re.fullmatch(r"latest(?:~(\d+))?", ref)
        if m:
            listed = set(self.listed_ids())
            sealed = [r for r in sealed if r in listed]
            back = int(m.group(1) or 0)
            if back >= len(sealed):
                raise NotFoundError(
                    f"{ref}: the store has {plural(len(sealed), 'complete run')}",
                    hint="run something with `repro run`, or see `repro ls`",
                )
            return self.load_run(sealed[-1 - back], lists)
        if ref in self.run_ids():
            return self.load_run(ref, lists)
        matches = [r for r in sealed if r.startswith(ref)]
        if len(matches) == 1:
            return self.load_run(matches[0], lists)
        if len(matches) > 1:
            raise UsageError(f"run ref {ref!r} is ambiguous: {', '.join(matches[:5])}")
        raise NotFoundError(
            f"no run matches {ref!r}", hint="`repro ls` lists the runs; refs can also be capsule files"
        )

    def open_capsule(self, path: Path) -> LoadedRun:
        """Verify a capsule tar and extract it to a scratch directory.

        Raises:
            CapsuleInvalid: corrupt, truncated, tampered or unsafe.
        """
        import tempfile

        scratch = Path(tempfile.mkdtemp(prefix="repro-capsule-"))
        # Removed when this process ends, whatever happens: an extracted capsule can be large.
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        try:
            verified = verify_tar(path, extract_to=scratch)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        carried = path.resolve() if IMAGE_MEMBER in verified.members else None
        sums = hashlib.sha256(verified.sums).hexdigest()
        return LoadedRun(
            verified.record,
            path.resolve(),
            scratch,
            from_capsule=True,
            image_archive=carried,
            sums_sha256=sums,
            attestation=verified.attestation,
            model_signature=verified.model_signature,
        )

    def import_run(self, loaded: LoadedRun) -> LoadedRun:
        """Copy an extracted capsule into this store (blobs and record), marked as from elsewhere
        unless the store made that very record itself; idempotent.

        Every blob is re-hashed on the way in, and a blob already in the store under the
        same name is re-hashed too: a poisoned copy is replaced, never trusted by its name.

        Raises:
            CapsuleInvalid: a blob of the capsule does not match its name.
            StoreConflict: the store holds another record under the capsule's run id.
        """
        self._refuse_other_record(loaded.record)
        self.ensure()
        for digest in sorted(loaded.record.blobs()):
            source = loaded.blob_path(digest)  # re-hashed against its name
            if not source.is_file():
                raise CapsuleInvalid(f"blob {digest} is missing from the capsule", member=blob_member(digest))
            if not self.has_blob(digest) or hash_file(self.blob_path(digest)) != digest:
                self.blobs.copy_blob(source, digest)
        run_dir = self.runs_dir / loaded.record.id
        if not (run_dir / RECORD_NAME).is_file():
            self.mark_foreign(loaded.record.id, f"imported from {loaded.location.name}")
            write_atomic(run_dir / RECORD_NAME, self.dump(loaded.record))
            with self._index() as db:
                index.put(db, loaded.record)
        imported = self.load_run(loaded.record.id)
        imported.image_archive = loaded.image_archive
        return imported

    def _refuse_other_record(self, record: Record) -> None:
        """Never let a capsule's record and a stored one share an id with different content."""
        stored = self.runs_dir / record.id / RECORD_NAME
        if not stored.is_file():
            return
        try:
            same = _content(load_record(stored.read_bytes(), self.blobs.read_list)) == _content(record)
        except CapsuleInvalid:
            same = False
        if not same:
            raise StoreConflict(
                f"this store already holds a different run {record.id}; "
                "the capsule was not imported and nothing was replayed",
                hint=f"compare them with `repro diff {record.id} CAPSULE.tar`, "
                "or replay the capsule in another project directory (repro -C DIR replay …)",
            )

    def remove_run(self, run_id: str) -> None:
        """Delete a run directory, then its index row (the files first: that frees the space)."""
        shutil.rmtree(self.runs_dir / run_id, ignore_errors=True)
        index.remove(self.dir, run_id)

    # ------------------------------------------------------------------ index (`repro.store.index`)

    def earlier_writers(self, files: dict[str, str]) -> dict[str, str]:
        """Of ``files`` (path → hash), those a sealed run wrote byte for byte: path → the latest such run
        (`index.earlier_writers`)."""
        return index.earlier_writers(self.dir, files)

    def _index(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return index.open_index(self.dir, self._index_outputs)

    def _index_outputs(self, db: sqlite3.Connection) -> None:
        """Index the outputs of the runs sealed before the index kept outputs (once per store)."""
        for run_id in self.run_ids():
            record_path = self.runs_dir / run_id / RECORD_NAME
            if not record_path.is_file():
                continue
            try:
                record = load_record(record_path.read_bytes())  # its code lists are not read
                index.put_outputs(db, hydrate(record, self.blobs.read_list, only=("results.outputs",)))
            except (CapsuleInvalid, OSError):
                continue


def _content(record: Record) -> dict[str, Any]:
    """A record's content, whichever way it keeps its file lists (inline or as blobs)."""
    data = record.to_dict()
    data.pop("lists", None)
    return data
