"""Secrets in a run's outputs: found when the run is sealed, refused when the run is handed over.

Outputs are the result and are never rewritten; a checkpoint's pickled training arguments or a
saved config that keeps a hub token (`"hub_token": "hf_…"`) is named instead, and `repro export`
refuses such a run unless told otherwise (`--allow-secrets-in-outputs`). Each output is read once
per content: what it holds is cached by digest in the store's cache, so an export reads none again;
a set of outputs found clean together is cached as one row too, so an export of thousands of outputs
looks up one row, not one each.
A file over `MAX_SCAN` bytes (weights) is not read.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from repro.facts.secrets.verdicts import RULES_ID

if TYPE_CHECKING:
    from repro.facts.secrets.mask import Masker

OUTPUT_VERDICTS_DB = "output-verdicts.sqlite"  # in the store's cache directory
MAX_SCAN = 1 << 30
_CHUNK = 1 << 20
_OVERLAP = 1 << 16  # the longest credential shape a chunk boundary may cut
KNOWN_VALUE = "a secret of the run's environment"
_BATCH = 500  # digests a lookup names (SQLite allows 999 parameters in old builds)


@dataclass(frozen=True)
class OutputSecret:
    """An output file holding a credential: its path and what it holds (`an API token`)."""

    path: str
    kind: str


def scan_file(path: Path, masker: Masker | None = None) -> str | None:
    """What credential a file holds (a shape, or a value ``masker`` knows), or None; read in chunks
    that overlap, so a token cut by a chunk boundary is found."""
    from repro.facts.secrets.rules import shape_in_bytes

    tail = b""
    try:
        if path.stat().st_size > MAX_SCAN:
            return None
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                window = tail + chunk
                if (kind := shape_in_bytes(window)) is not None:
                    return kind
                if masker is not None and masker.holds_known(window):
                    return KNOWN_VALUE
                tail = window[-_OVERLAP:]
    except OSError:
        return None
    return None


def output_secrets(
    entries: Iterable[tuple[str, str]],
    blob_path: Callable[[str], Path],
    cache_db: Path | None,
    masker: Masker | None = None,
) -> list[OutputSecret]:
    """The outputs (``entries``: path, digest) holding a credential, each content read once ever
    (the verdicts of a run's outputs are looked up in batches, not one query each).

    Raises:
        CapsuleInvalid: from ``blob_path``, a blob whose bytes do not match its name.
    """
    found: list[OutputSecret] = []
    entries = list(entries)
    digests = {digest for _, digest in entries}
    with _Cache(cache_db) as cache:
        together = _set_key(digests)
        if cache.clean_set(together):
            return found
        known = cache.get_many(digests)
        new: dict[str, str] = {}
        for rel, digest in entries:
            kind = known.get(digest)
            if kind is None:
                path = blob_path(digest)
                if not path.is_file():
                    continue
                kind = scan_file(path, masker) or ""
                new[digest] = known[digest] = kind
            if kind:
                found.append(OutputSecret(rel, kind))
        cache.put_many(new)
        if not found and len(known) >= len(digests):  # each one read and clean: the set is
            cache.put_clean_set(together)
    return found


def _set_key(digests: set[str]) -> str:
    """The name of a set of contents in the cache (their digests, sorted, hashed)."""
    return hashlib.sha256("\n".join(sorted(digests)).encode()).hexdigest()


class _Cache:
    """digest → what it holds ('' for nothing), under today's rules; only ever saves work."""

    def __init__(self, db_path: Path | None) -> None:
        self._conn: sqlite3.Connection | None = None
        if db_path is None:
            return
        try:
            db_path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(os.fspath(db_path), timeout=30.0, isolation_level=None)
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS outputs (hash TEXT NOT NULL, rules TEXT NOT NULL, "
                "kind TEXT NOT NULL, PRIMARY KEY (hash, rules)) WITHOUT ROWID"
            )
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS clean_sets (name TEXT NOT NULL, rules TEXT NOT NULL, "
                "PRIMARY KEY (name, rules)) WITHOUT ROWID"
            )
        except (sqlite3.Error, OSError):
            self._close()

    def clean_set(self, name: str) -> bool:
        """Whether the set of contents called ``name`` (`_set_key`) was found clean, all of it."""
        if self._conn is None:
            return False
        try:
            query = "SELECT 1 FROM clean_sets WHERE name = ? AND rules = ?"
            return self._conn.execute(query, (name, RULES_ID)).fetchone() is not None
        except sqlite3.Error:
            return False

    def put_clean_set(self, name: str) -> None:
        """Keep that the set of contents called ``name`` holds no credential."""
        if self._conn is None:
            return
        with contextlib.suppress(sqlite3.Error):
            self._conn.execute("INSERT OR IGNORE INTO clean_sets VALUES (?, ?)", (name, RULES_ID))

    def get_many(self, digests: set[str]) -> dict[str, str]:
        """What each of ``digests`` the cache knows holds; those it does not know are left out."""
        if self._conn is None:
            return {}
        ordered, known = sorted(digests), dict[str, str]()
        try:
            for i in range(0, len(ordered), _BATCH):
                batch = ordered[i : i + _BATCH]
                marks = ",".join("?" * len(batch))
                query = f"SELECT hash, kind FROM outputs WHERE rules = ? AND hash IN ({marks})"
                rows = self._conn.execute(query, (RULES_ID, *batch))
                known.update((str(h), str(k)) for h, k in rows)
        except sqlite3.Error:
            return known
        return known

    def put_many(self, verdicts: dict[str, str]) -> None:
        """Keep ``verdicts`` (digest → what it holds), in one transaction (one sync, not one each)."""
        if self._conn is None or not verdicts:
            return
        rows = [(digest, RULES_ID, kind) for digest, kind in verdicts.items()]
        try:
            self._conn.execute("BEGIN")
            self._conn.executemany("INSERT OR REPLACE INTO outputs VALUES (?, ?, ?)", rows)
            self._conn.execute("COMMIT")
        except sqlite3.Error:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> _Cache:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()
