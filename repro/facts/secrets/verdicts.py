"""Code files already found clean under today's rules, by digest: not scanned again.

A clean file holds no key block or credential file, no credential shape and no value under a
credential key; a run then only looks in it for the values it knows (its environment's and
command line's secrets), and not at all when it knows none. The rules' own fingerprint (and a
project's extra name patterns) is part of the key, so a change of rules scans everything anew.
The database holds digests only, never a value; like the hash cache it only ever saves work:
when it cannot be opened or written, every file is scanned.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path
from types import TracebackType

from repro.facts.secrets import rules

VERDICTS_DB = "code-verdicts.sqlite"  # in the store's cache directory
RULES_ID = hashlib.sha256(
    repr(
        (
            [(s.kind, s.pattern, s.flags) for s in rules.SHAPES],
            rules.ARMOUR,
            rules.CODE_LITERAL.pattern,
            rules.CREDENTIAL_LOCATIONS,
            sorted(
                rules.SECRET_WORDS | rules.SECRET_LAST_WORDS | rules.KEY_QUALIFIERS | rules.TOKEN_QUALIFIERS
            ),
            sorted(rules.AMBIGUOUS_NAMES | rules.AMBIGUOUS_WORDS | rules.DESCRIPTORS | rules.SWITCH_PREFIXES),
        )
    ).encode()
).hexdigest()[:16]


class Verdicts:
    """`clean(digest)` and `add(digest)`; written in one transaction when the block ends."""

    def __init__(self, db_path: Path | None, extra: tuple[str, ...] = ()) -> None:
        self.rules = hashlib.sha256(f"{RULES_ID}|{'|'.join(extra)}".encode()).hexdigest()[:16]
        self._known: set[str] = set()
        self._new: list[str] = []
        self._conn: sqlite3.Connection | None = None
        if db_path is None:
            return
        try:
            db_path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(os.fspath(db_path), timeout=30.0, isolation_level=None)
            self._conn.execute("PRAGMA busy_timeout = 30000")
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = OFF")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS clean (hash TEXT NOT NULL, rules TEXT NOT NULL, "
                "PRIMARY KEY (hash, rules)) WITHOUT ROWID"
            )
            rows = self._conn.execute("SELECT hash FROM clean WHERE rules = ?", (self.rules,)).fetchall()
            self._known = {r[0] for r in rows}
        except sqlite3.Error:
            self.close()

    def clean(self, digest: str) -> bool:
        return digest in self._known

    def add(self, digest: str) -> None:
        if digest not in self._known:
            self._known.add(digest)
            self._new.append(digest)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if self._new:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(
                    "INSERT OR IGNORE INTO clean VALUES (?, ?)", [(d, self.rules) for d in self._new]
                )
                conn.execute("COMMIT")
        except sqlite3.Error:
            pass
        finally:
            conn.close()

    def __enter__(self) -> Verdicts:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
