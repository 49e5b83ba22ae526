"""The store's index (``.repro/index.sqlite``): one row per run for `repro ls`, and which run wrote
which bytes where. The records are the truth; the index only saves reading them, and its rows are
read again from the records when it is missing, older or cannot be written.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from repro.store.processes import pid_alive
from repro.store.record import Record
from repro.store.rundir import RunDir

# A run's status in `repro ls`: its record's, or, for a run not sealed yet, whether its process is
# alive (running, incomplete) or its detached job waits (pending); a run dir that does not read: invalid.
RowStatus = Literal["succeeded", "failed", "interrupted", "running", "incomplete", "pending", "invalid"]
ROW_STATUSES: tuple[RowStatus, ...] = get_args(RowStatus)


@dataclass
class RunRow:
    """One line of `repro ls`."""

    id: str
    created: str
    status: RowStatus
    kind: str
    command: str
    duration_s: float | None
    backend: str | None
    parent: str | None = None
    verdict: str | None = None  # a replay's verdict against its parent


def indexed(store_dir: Path) -> dict[str, tuple[Any, ...]]:
    """The index's rows by id, opened read-only; empty when there is no readable index."""
    path = store_dir / "index.sqlite"
    if not path.is_file():
        return {}
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error:
        return {}
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] < INDEX_VERSION:
            return {}  # an older index: its rows are read again from the records, and rewritten
        return {r[0]: r for r in db.execute("SELECT * FROM runs")}
    except sqlite3.Error:
        return {}
    finally:
        db.close()


def earlier_writers(store_dir: Path, files: dict[str, str]) -> dict[str, str]:
    """Of ``files`` (path → hash), those a sealed run wrote byte for byte: path → the latest such run.

    Read-only and best effort: an index that is missing, old or unreadable knows nothing.
    """
    path = store_dir / "index.sqlite"
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
def open_index(
    store_dir: Path, backfill: Callable[[sqlite3.Connection], None]
) -> Iterator[sqlite3.Connection]:
    """The index, created or brought to the current version (``backfill`` indexes the outputs of the
    runs sealed before the index kept outputs), in a transaction."""
    store_dir.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(store_dir / "index.sqlite", timeout=30)
    try:
        db.execute(
            "CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, created TEXT, status TEXT, "
            "kind TEXT, command TEXT, duration REAL, backend TEXT, parent TEXT, verdict TEXT)"
        )
        db.execute("CREATE TABLE IF NOT EXISTS outputs (run TEXT, path TEXT, hash TEXT)")
        db.execute("CREATE INDEX IF NOT EXISTS outputs_by_path ON outputs (path, hash)")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version < INDEX_VERSION:
            with db:
                if version < 1:
                    backfill(db)
                if version < 2:  # rows read again from the records: commands quoted
                    db.execute("DELETE FROM runs")
            db.execute(f"PRAGMA user_version = {INDEX_VERSION}")
        with db:
            yield db
    finally:
        db.close()


def remove(store_dir: Path, run_id: str) -> None:
    """Drop a run's rows from the index, if there is one."""
    if not (store_dir / "index.sqlite").is_file():
        return
    try:
        with open_index(store_dir, lambda db: None) as db:
            db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
            db.execute("DELETE FROM outputs WHERE run = ?", (run_id,))
    except sqlite3.Error:
        pass  # a full disk: `rows()` lists from the run directories, so a stale row is harmless


# 1: the outputs table (which run wrote which bytes where); 2: commands quoted with shlex.join
INDEX_VERSION = 2


def put_outputs(db: sqlite3.Connection, record: Record) -> None:
    """Which bytes the run wrote where in the project (a replay writes into a scratch copy: none)."""
    db.execute("DELETE FROM outputs WHERE run = ?", (record.id,))
    if record.kind == "replay":
        return
    db.executemany(
        "INSERT INTO outputs VALUES (?, ?, ?)", [(record.id, o.path, o.hash) for o in record.results.outputs]
    )


def put(db: sqlite3.Connection, record: Record) -> None:
    put_outputs(db, record)
    row = row_from_record(record)
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


def row_from_record(record: Record) -> RunRow:
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


def row_from_db(row: tuple[Any, ...]) -> RunRow:
    run_id, created, status, kind, command, duration, backend, parent, verdict = row
    return RunRow(run_id, created, row_status(status), kind, command, duration, backend, parent, verdict)


def row_status(value: Any) -> RowStatus:
    """``value`` as a row's status; anything else (a damaged index, a job file's stray word): invalid."""
    return next((known for known in ROW_STATUSES if value == known), "invalid")


def unsealed_row(run_dir: Path) -> RunRow:
    layout = RunDir(run_dir)
    info: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        info = json.loads(layout.running.read_text())
    detached = layout.detached.is_file() and info.get("status") in ("pending", "running")
    status: RowStatus
    if detached:
        status = row_status(info["status"])  # as the job's last look found it
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
