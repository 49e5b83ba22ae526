"""The store: `.repro/` at the project root — run directories, blobs, index, caches.

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
import secrets
import shlex
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from repro.errors import CapsuleInvalid, NotFoundError, StoreConflict, UsageError
from repro.store import atomic
from repro.store.capsule import (
    IMAGE_MEMBER,
    RECORD_NAME,
    SPILLED_LISTS,
    Record,
    blob_member,
    dump_record,
    hydrate,
    load_record,
    read_list_file,
    verify_tar,
)
from repro.store.hashing import copy_hashed, hash_bytes, hash_file
from repro.store.processes import pid_alive
from repro.store.rundir import (
    DETACHED as DETACHED,  # a detached run's mark (repro/backends/slurm/detached.py)
)
from repro.store.rundir import RunDir
from repro.units import plural

STORE_DIR = ".repro"
_SMALL = 1 << 20  # `Store.put_fd` reads a file up to this size whole, hashes it, and writes it once
_ID_RE = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{4}$")


def new_run_id(now: datetime | None = None) -> str:
    """A run id that sorts by time to the millisecond: ``YYYYMMDD-HHMMSS-xxxx``.

    The four hex digits are the millisecond (times 64) plus 6 random bits, so runs
    started within one second still sort in the order they started.
    """
    now = now or datetime.now(timezone.utc)
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
        return _read_checked(self.blob_root / blob_member(digest), digest)

    def unchecked_path(self, digest: str) -> Path:
        """Where a blob of the run lies, for a reader that checks its bytes as it reads them
        (`capsule.pack`)."""
        return self.blob_root / blob_member(digest)

    def read_lists(self) -> Record:
        """The record with the file lists it keeps as blobs read in (each blob size-bounded and
        checked against its name first); what show, diff, replay and export need.

        Raises:
            CapsuleInvalid: a list blob missing, replaced, malformed or over its bound.
        """
        return hydrate(self.record, lambda digest: read_list_blob(self.blob_root, digest))


@dataclass
class RunRow:
    """One line of `repro ls`."""

    id: str
    created: str
    status: str  # succeeded | failed | interrupted | running | incomplete
    kind: str
    command: str
    duration_s: float | None
    backend: str | None
    parent: str | None = None
    verdict: str | None = None  # a replay's verdict against its parent


class Store:
    """The `.repro/` directory of one project."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / STORE_DIR
        self.runs_dir = self.dir / "runs"
        self.blobs_dir = self.dir / "blobs"
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

    # ------------------------------------------------------------------ blobs

    def blob_path(self, digest: str) -> Path:
        return self.dir / blob_member(digest)

    def has_blob(self, digest: str) -> bool:
        return self.blob_path(digest).is_file()

    def put_bytes(self, data: bytes) -> str:
        """Store bytes once; returns their digest."""
        digest = hash_bytes(data)
        target = self.blob_path(digest)
        if not target.is_file():
            self._write_atomic(target, data)
        return digest

    def put_file(self, path: Path, digest: str | None = None) -> str:
        """Store a file's bytes once (hashing it unless its digest is known); returns the digest of
        the bytes stored: a file that changed since ``digest`` was taken (a log still growing) is
        stored under the digest of what was copied, so no blob's name ever lies."""
        digest = digest or hash_file(path)
        stored = f"{self.blobs_dir}/{digest[:2]}/{digest}"  # `blob_path` as a string: one stat per code file
        if os.path.isfile(stored):
            return digest
        return self._copy_blob(path, digest)

    def put_fd(self, fd: int) -> tuple[str, int]:
        """Store the bytes of an open file once, hashed while they are copied (one read; a file up
        to 1 MiB is read whole and written only when the store lacks it); the digest and the size
        stored. What a run produced is stored this way (`repro.collect.produced`
        opened it without following a link).

        Raises:
            OSError: the file could not be read, or the blob written (naming it).
        """
        head = bytearray()  # a small file (most outputs): read whole, hashed, written only when new
        while len(head) <= _SMALL and (chunk := os.read(fd, _SMALL + 1 - len(head))):
            head += chunk
        if len(head) <= _SMALL:
            return self.put_bytes(bytes(head)), len(head)
        os.lseek(fd, -len(head), os.SEEK_CUR)
        # Named like the partial copies `partial_blobs` finds, so a killed copy is collected by `gc`.
        tmp = self.blobs_dir / "00" / f".put-{secrets.token_hex(6)}.{os.getpid()}.tmp"
        tmp.parent.mkdir(parents=True, exist_ok=True)
        try:
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            try:
                digest, size = copy_hashed(fd, out)
            finally:
                os.close(out)
            target = self.blob_path(digest)
            if not target.is_file():
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp, target)
            return digest, size
        except OSError as e:
            raise _named(e, tmp) from e
        finally:
            tmp.unlink(missing_ok=True)  # a full disk leaves no partial blob behind

    def _copy_blob(self, source: Path, digest: str) -> str:
        target = self.blob_path(digest)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            shutil.copyfile(source, tmp)
            copied = hash_file(tmp)  # read back from the page cache: cheap
            if copied != digest:
                digest, target = copied, self.blob_path(copied)
                target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, target)
        except OSError as e:
            raise _named(e, target) from e
        finally:
            tmp.unlink(missing_ok=True)  # a full disk leaves no partial blob behind
        return digest

    def dump(self, record: Record) -> bytes:
        """The record's YAML bytes, its long file lists stored as blobs (`capsule.spilled`)."""
        return dump_record(record, self.put_bytes)

    def _list_reader(self, digest: str) -> bytes | None:
        return read_list_blob(self.dir, digest)

    @staticmethod
    def _write_atomic(target: Path, data: bytes) -> None:
        try:
            atomic.write_bytes(target, data)
        except OSError as e:
            raise _named(e, target) from e

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
        self._write_atomic(RunDir(run_dir).pending_record, self.dump(record))
        self._write_atomic(RunDir(run_dir).pending_kept, json.dumps(kept).encode())

    def load_pending(self, run_id: str) -> tuple[Record, dict[str, Any]] | None:
        """What `write_pending` kept for an unsealed run; None when nothing was kept.

        Raises:
            CapsuleInvalid: the kept record is unreadable.
        """
        run_dir = self.run_dir(run_id)
        if not run_dir.pending_record.is_file():
            return None
        record = load_record(run_dir.pending_record.read_bytes(), self._list_reader)
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
        return _unsealed_row(self.runs_dir / run_id).status in ("running", "pending")

    def read_blob(self, digest: str | None) -> bytes | None:
        """A blob's bytes, checked against its name; None when it is missing.

        Raises:
            CapsuleInvalid: the bytes do not match the name.
        """
        if not digest:
            return None
        return _read_checked(self.blob_path(digest), digest)

    def seal(self, record: Record, run_dir: Path) -> Path:
        """Write the record atomically (the run's completion mark), drop scratch files, index it."""
        layout = RunDir(run_dir)
        self._write_atomic(layout.record, self.dump(record))
        layout.running.unlink(missing_ok=True)
        shutil.rmtree(layout.work, ignore_errors=True)
        with contextlib.suppress(sqlite3.Error):  # the record is the truth; `rows()` indexes it later
            with self._index() as db:
                _index_put(db, record)
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
        record = hydrate(load_record(record_path.read_bytes()), self._list_reader, only=lists)
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
        self._write_atomic(run_dir.foreign, json.dumps({"why": why}).encode())

    def rows(self) -> list[RunRow]:
        """Every run, sealed or not, oldest first.

        The index is only read (a full disk or a read-only store still lists); runs it
        lacks are read from their records and added to it when it can be written.
        """
        ids = self.run_ids()
        rows: list[RunRow] = []
        known = self._indexed()
        unindexed: list[Record] = []
        for run_id in ids:
            run_dir = self.runs_dir / run_id
            if run_id in known:
                rows.append(_row_from_db(known[run_id]))
            elif (run_dir / RECORD_NAME).is_file():
                try:  # the code lists it keeps as blobs are never read here; its outputs are indexed
                    raw = (run_dir / RECORD_NAME).read_bytes()
                    record = hydrate(load_record(raw), self._list_reader, only=("results.outputs",))
                except CapsuleInvalid:
                    rows.append(RunRow(run_id, "", "invalid", "run", "?", None, None))
                    continue
                unindexed.append(record)
                rows.append(_row_from_record(record))
            else:
                rows.append(_unsealed_row(run_dir))
        if unindexed:
            with contextlib.suppress(sqlite3.Error, OSError), self._index() as db:
                for record in unindexed:
                    _index_put(db, record)
        return rows

    def _indexed(self) -> dict[str, tuple[Any, ...]]:
        """The index's rows by id, opened read-only; empty when there is no readable index."""
        path = self.dir / "index.sqlite"
        if not path.is_file():
            return {}
        try:
            db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        except sqlite3.Error:
            return {}
        try:
            if db.execute("PRAGMA user_version").fetchone()[0] < _INDEX_VERSION:
                return {}  # an older index: its rows are read again from the records, and rewritten
            return {r[0]: r for r in db.execute("SELECT * FROM runs")}
        except sqlite3.Error:
            return {}
        finally:
            db.close()

    def resolve(self, ref: str, lists: tuple[str, ...] = SPILLED_LISTS) -> LoadedRun:
        """A run from a ref: id, unique id prefix, `latest`, `latest~N`, a run dir, a capsule tar;
        ``lists``: the file lists kept as blobs to read for a stored run (`load_run`).

        Raises:
            NotFoundError: nothing matches. UsageError: an ambiguous prefix.
            CapsuleInvalid: a capsule file that fails verification.
        """
        path = Path(ref)
        if ref.endswith(".tar") or path.is_file():
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
                self._copy_blob(source, digest)
        run_dir = self.runs_dir / loaded.record.id
        if not (run_dir / RECORD_NAME).is_file():
            self.mark_foreign(loaded.record.id, f"imported from {loaded.location.name}")
            self._write_atomic(run_dir / RECORD_NAME, self.dump(loaded.record))
            with self._index() as db:
                _index_put(db, loaded.record)
        imported = self.load_run(loaded.record.id)
        imported.image_archive = loaded.image_archive
        return imported

    def _refuse_other_record(self, record: Record) -> None:
        """Never let a capsule's record and a stored one share an id with different content."""
        stored = self.runs_dir / record.id / RECORD_NAME
        if not stored.is_file():
            return
        try:
            same = _content(load_record(stored.read_bytes(), self._list_reader)) == _content(record)
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
        if not (self.dir / "index.sqlite").is_file():
            return
        try:
            with self._index() as db:
                db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
                db.execute("DELETE FROM outputs WHERE run = ?", (run_id,))
        except sqlite3.Error:
            pass  # a full disk: `rows()` lists from the run directories, so a stale row is harmless

    def partial_blobs(self) -> list[Path]:
        """Partial blob copies (``.<digest>.<pid>.tmp``) whose writing process is gone."""
        found: list[Path] = []
        if not self.blobs_dir.is_dir():
            return found
        for path in self.blobs_dir.glob("*/.*.tmp"):
            pid = path.name[: -len(".tmp")].rpartition(".")[2]
            if not (pid.isdigit() and pid_alive(int(pid))):
                found.append(path)
        return sorted(found)

    # ------------------------------------------------------------------ index

    def earlier_writers(self, files: dict[str, str]) -> dict[str, str]:
        """Of ``files`` (path → hash), those a sealed run wrote byte for byte: path → the latest such run.

        Read-only and best effort: an index that is missing, old or unreadable knows nothing.
        """
        path = self.dir / "index.sqlite"
        if not files or not path.is_file():
            return {}
        found: dict[str, str] = {}
        try:
            db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        except sqlite3.Error:
            return {}
        try:  # in batches (a snapshot of 50k files is 100 queries, not 50k)
            paths = list(files)
            for start in range(0, len(paths), 500):
                batch = paths[start : start + 500]
                marks = ",".join("?" * len(batch))
                rows = db.execute(f"SELECT path, hash, run FROM outputs WHERE path IN ({marks})", batch)  # noqa: S608
                for rel, digest, run in rows:
                    if digest == files[rel] and run > found.get(rel, ""):
                        found[rel] = run
        except sqlite3.Error:
            return {}
        finally:
            db.close()
        return found

    @contextlib.contextmanager
    def _index(self) -> Iterator[sqlite3.Connection]:
        self.dir.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.dir / "index.sqlite", timeout=30)
        try:
            db.execute(
                "CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, created TEXT, status TEXT, "
                "kind TEXT, command TEXT, duration REAL, backend TEXT, parent TEXT, verdict TEXT)"
            )
            db.execute("CREATE TABLE IF NOT EXISTS outputs (run TEXT, path TEXT, hash TEXT)")
            db.execute("CREATE INDEX IF NOT EXISTS outputs_by_path ON outputs (path, hash)")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version < _INDEX_VERSION:
                with db:
                    if version < 1:
                        self._index_outputs(db)
                    if version < 2:  # rows read again from the records: commands quoted
                        db.execute("DELETE FROM runs")
                db.execute(f"PRAGMA user_version = {_INDEX_VERSION}")
            with db:
                yield db
        finally:
            db.close()

    def _index_outputs(self, db: sqlite3.Connection) -> None:
        """Index the outputs of the runs sealed before the index kept outputs (once per store)."""
        for run_id in self.run_ids():
            record_path = self.runs_dir / run_id / RECORD_NAME
            if not record_path.is_file():
                continue
            try:
                record = load_record(record_path.read_bytes())  # its code lists are not read
                _index_outputs_of(db, hydrate(record, self._list_reader, only=("results.outputs",)))
            except (CapsuleInvalid, OSError):
                continue


def replaced_blob(digest: str, path: Path) -> CapsuleInvalid:
    """The error for a blob whose bytes do not match its name."""
    return CapsuleInvalid(
        f"blob {digest} does not match its content-address name (replaced or corrupt): {path}",
        member=str(path),
        hint="the store was changed by hand or damaged; re-import the run's capsule, "
        "or `repro verify RUN` to check every blob",
    )


def read_list_blob(blob_root: Path, digest: str) -> bytes | None:
    """A file-list blob under ``blob_root`` (`capsule.read_list_file`): refused over
    `limits.MAX_LIST_BYTES` before it is read, checked against its name; None when missing.

    Raises:
        CapsuleInvalid: too large, or bytes that do not match the name.
    """
    return read_list_file(blob_root / blob_member(digest), digest)


def _content(record: Record) -> dict[str, Any]:
    """A record's content, whichever way it keeps its file lists (inline or as blobs)."""
    data = record.to_dict()
    data.pop("lists", None)
    return data


def _read_checked(path: Path, digest: str) -> bytes | None:
    """The bytes at ``path`` when they hash to ``digest``; None when there is no such file.

    Raises:
        CapsuleInvalid: the bytes do not match.
    """
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    if hash_bytes(data) != digest:
        raise replaced_blob(digest, path)
    return data


def _named(e: OSError, path: Path) -> OSError:
    """The error with the path it concerns (a failed write() does not say which file)."""
    if e.filename is not None:
        return e
    return type(e)(e.errno, e.strerror, str(path)) if e.errno is not None else OSError(str(e), str(path))


# 1: the outputs table (which run wrote which bytes where); 2: commands quoted with shlex.join
_INDEX_VERSION = 2


def _index_outputs_of(db: sqlite3.Connection, record: Record) -> None:
    """Which bytes the run wrote where in the project (a replay writes into a scratch copy: none)."""
    db.execute("DELETE FROM outputs WHERE run = ?", (record.id,))
    if record.kind == "replay":
        return
    db.executemany(
        "INSERT INTO outputs VALUES (?, ?, ?)", [(record.id, o.path, o.hash) for o in record.results.outputs]
    )


def _index_put(db: sqlite3.Connection, record: Record) -> None:
    _index_outputs_of(db, record)
    row = _row_from_record(record)
    db.execute(
        "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            row.id,
            row.created,
            row.status,
            row.kind,
            row.command,
            row.duration_s,
            row.backend,
            row.parent,
            row.verdict,
        ),
    )


def _row_from_record(record: Record) -> RunRow:
    return RunRow(
        id=record.id,
        created=record.created,
        status=record.results.status,
        kind="resume" if record.resumed_from else record.kind,
        command=shlex.join(record.command.argv),
        duration_s=record.results.duration_s,
        backend=record.backend.name,
        parent=record.resumed_from or record.parent,
        verdict=(record.verification or {}).get("status"),
    )


def _row_from_db(row: tuple[Any, ...]) -> RunRow:
    run_id, created, status, kind, command, duration, backend, parent, verdict = row
    return RunRow(run_id, created, status, kind, command, duration, backend, parent, verdict)


def _unsealed_row(run_dir: Path) -> RunRow:
    layout = RunDir(run_dir)
    info: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        info = json.loads(layout.running.read_text())
    detached = layout.detached.is_file() and info.get("status") in ("pending", "running")
    if detached:
        status = str(info["status"])  # as the job's last look found it
    else:
        status = "running" if pid_alive(info.get("pid")) else "incomplete"
    return RunRow(
        id=run_dir.name,
        created=info.get("started", ""),
        status=status,
        kind="run",
        command=shlex.join(str(a) for a in info.get("argv", [])),
        duration_s=None,
        backend="slurm" if detached else None,
    )

    return True
