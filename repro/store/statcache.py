"""The stat cache in SQLite: (absolute path, size, mtime_ns, inode, ctime_ns) → xxh3-128.

The cache key is (absolute path, size, mtime_ns, inode, ctime_ns). A file modified
with the same size and its mtime forced back still misses, because its ctime (and,
when replaced, its inode) changed. A row whose file changed within the timestamp
granularity of the moment it was hashed is "racy" (git's term) and is not trusted:
that file is read again on the next check, after which its row is safe. The cache only
ever saves work: it never decides a digest.
"""

from __future__ import annotations

import marshal
import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from repro.store.hashing import _HEX, _hash_open, hash_file
from repro.store.record import FileEntry

# A stat row is trusted only when the file's ctime is older than the moment it was
# hashed by more than this: it covers coarse kernel clocks and 2 s FAT/SMB timestamps.
RACY_WINDOW_NS = 2_000_000_000

_CACHE_FORMAT = 3

__all__ = ["RACY_WINDOW_NS", "HashCache", "hash_file_cached", "hash_files_cached"]


class _Stat(NamedTuple):
    """What the cache keys on, plus where the file is. Sorts by `rel`."""

    rel: str  # relative to rel_to, POSIX
    path: str  # absolute
    size: int
    key: str  # "size:mtime_ns:inode:ctime_ns"
    ctime_ns: int


def _key(st: os.stat_result) -> str:
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}:{st.st_ctime_ns}"


def _common_dir(paths: list[str]) -> str:
    """The deepest directory holding every one of `paths` (absolute, 2 or more)."""
    # The common prefix of all strings is that of the smallest and the largest: O(n) in C.
    common = os.path.commonprefix([min(paths), max(paths)])
    return common[: common.rfind("/")]


def _prefix_range(prefix: str) -> tuple[str, str]:
    """Bounds [lo, hi) of the paths strictly under directory `prefix`; "0" sorts just after "/"."""
    base = prefix.rstrip("/")
    return base + "/", base + "0"


# A fresh row: (absolute path, stat key, ctime_ns, hashed-at ns, hash).
_Row = tuple[str, str, int, int, str]


class HashCache:
    """A stat cache: (absolute path, size, mtime_ns, inode, ctime_ns) → xxh3-128.

    Safe for concurrent processes (WAL journal, busy timeout). The cache only ever
    saves work: when its database cannot be opened or written, hashing goes on
    without it. It is never synced to disk (``synchronous = OFF``: on 100,000 files the
    checkpoint's fsync cost more than the hashing's whole margin over ``xxh128sum``); a
    power loss can at worst damage it, and a damaged cache is dropped and started afresh.
    """

    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        self._conn: sqlite3.Connection | None = None
        try:
            self.db_path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = self._open()
        except (sqlite3.Error, OSError):
            self._conn = None

    def _open(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except sqlite3.DatabaseError as e:
            if type(e) is not sqlite3.DatabaseError or not _sqlite_file(self.db_path):
                raise  # busy, locked, read-only, or some other file: left alone, no cache
            for suffix in ("", "-wal", "-shm"):  # a damaged cache ("malformed"): start afresh
                Path(f"{self.db_path}{suffix}").unlink(missing_ok=True)
            return self._connect()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(os.fspath(self.db_path), timeout=30.0, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = OFF")
            if conn.execute("PRAGMA user_version").fetchone()[0] != _CACHE_FORMAT:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DROP TABLE IF EXISTS stat_cache")
                conn.execute("DROP TABLE IF EXISTS tree_cache")
                conn.execute(
                    "CREATE TABLE stat_cache (path TEXT PRIMARY KEY, stat TEXT NOT NULL,"
                    " ctime_ns INTEGER NOT NULL, hashed_ns INTEGER NOT NULL, hash TEXT NOT NULL)"
                    " WITHOUT ROWID"
                )
                # One row per hashed tree: the digest of its find(1) listing → its manifest.
                conn.execute(
                    "CREATE TABLE tree_cache (root TEXT NOT NULL, base TEXT NOT NULL,"
                    " listing TEXT NOT NULL, files BLOB NOT NULL, PRIMARY KEY (root, base))"
                    " WITHOUT ROWID"
                )
                conn.execute(f"PRAGMA user_version = {_CACHE_FORMAT}")
                conn.execute("COMMIT")
        except BaseException:
            conn.close()
            raise
        return conn

    @property
    def enabled(self) -> bool:
        """Whether the database is usable (False: every lookup misses)."""
        return self._conn is not None

    def lookup_many(self, paths: list[str]) -> dict[str, str]:
        """The trusted rows for `paths` (absolute): path → stat key followed by the 32-digit hash.

        One range query over the paths' deepest common directory. Rows there whose
        file no longer exists are dropped.
        """
        if self._conn is None or not paths:
            return {}
        racy = f"ctime_ns + {RACY_WINDOW_NS:d} < hashed_ns"
        args: tuple[str, ...]
        try:
            if len(paths) == 1:
                sql, args = (
                    f"SELECT path, stat || hash FROM stat_cache WHERE path = ? AND {racy}",
                    (paths[0],),
                )
            else:
                sql = f"SELECT path, stat || hash FROM stat_cache WHERE path >= ? AND path < ? AND {racy}"
                args = _prefix_range(_common_dir(paths))
            # Two columns let dict() build the mapping in C, row by row.
            rows: dict[str, str] = dict(self._conn.execute(sql, args).fetchall())
        except (sqlite3.Error, UnicodeEncodeError):
            return {}
        if len(rows) > len(paths) or not rows.keys() <= set(paths):
            gone = [(p,) for p in rows.keys() - set(paths) if not os.path.lexists(p)]
            self._write("DELETE FROM stat_cache WHERE path = ?", gone)
        return rows

    def knows(self, root: str) -> bool:
        """Whether any file under directory `root` has been hashed before."""
        if self._conn is None:
            return False
        try:
            lo, hi = _prefix_range(root)
            sql = "SELECT 1 FROM stat_cache WHERE path >= ? AND path < ? LIMIT 1"
            return self._conn.execute(sql, (lo, hi)).fetchone() is not None
        except (sqlite3.Error, UnicodeEncodeError):
            return False

    def tree(self, root: str, base: str, listing: str) -> list[FileEntry] | None:
        """The manifest recorded for `root` (paths relative to `base`) when its listing is `listing`."""
        if self._conn is None:
            return None
        try:
            row = self._conn.execute(
                "SELECT files FROM tree_cache WHERE root = ? AND base = ? AND listing = ?",
                (root, base, listing),
            ).fetchone()
            if row is None:
                return None
            rows = marshal.loads(row[0])
        except (sqlite3.Error, UnicodeEncodeError, ValueError, EOFError, TypeError):
            return None
        return [FileEntry(rel, size, digest) for rel, size, digest in rows]

    def store_tree(self, root: str, base: str, listing: str, files: list[FileEntry]) -> None:
        """Record a tree's manifest against the digest of its listing."""
        blob = marshal.dumps([(f.path, f.size, f.hash) for f in files])
        self._write("INSERT OR REPLACE INTO tree_cache VALUES (?, ?, ?, ?)", [(root, base, listing, blob)])

    def store_many(self, rows: Sequence[_Row]) -> None:
        """Write rows (absolute path, stat key, ctime_ns, hashed-at ns, hash) in one transaction."""
        self._write("INSERT OR REPLACE INTO stat_cache VALUES (?, ?, ?, ?, ?)", rows)

    def _write(self, sql: str, rows: Sequence[tuple[object, ...]]) -> None:
        if self._conn is None or not rows:
            return
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(sql, rows)
            except UnicodeEncodeError:
                # Names that are not UTF-8 cannot be SQLite TEXT; they stay uncached.
                self._conn.executemany(sql, [r for r in rows if _encodable(r[0])])
            self._conn.execute("COMMIT")
        except sqlite3.Error:
            # A busy or read-only cache only costs a re-hash next time.
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def close(self) -> None:
        """Close the database."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> HashCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _sqlite_file(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _encodable(value: object) -> bool:
    try:
        str(value).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def hash_file_cached(path: Path, cache: HashCache | None) -> str:
    """A file's xxh3-128, read from the stat cache when its stat is unchanged.

    Raises:
        OSError: the file cannot be stat'ed, opened or read.
    """
    if cache is None or not cache.enabled:
        return hash_file(path)
    abspath = os.path.abspath(path)
    key = _key(os.stat(abspath))
    row = cache.lookup_many([abspath]).get(abspath)
    if row is not None and row[:-_HEX] == key:
        return row[-_HEX:]
    started = time.time_ns()
    digest, st = _hash_open(abspath)
    cache.store_many([(abspath, _key(st), st.st_ctime_ns, started, digest)])
    return digest


def hash_files_cached(files: Sequence[tuple[str, os.stat_result]], cache: HashCache | None) -> list[str]:
    """The xxh3-128 of each (absolute path, its stat) in ``files``, in order: one range query of the
    stat cache for all of them, only the files whose stat changed read, their rows written in one
    transaction. What `hash_file_cached` gives file by file, without a query and a stat per file.

    Raises:
        OSError: a file the cache does not know cannot be opened or read.
    """
    enabled = cache is not None and cache.enabled
    known = cache.lookup_many([path for path, _ in files]) if cache is not None and enabled else {}
    digests: list[str] = []
    fresh: list[_Row] = []
    started = time.time_ns()
    for path, st in files:
        row = known.get(path)
        if row is not None and row[:-_HEX] == _key(st):
            digests.append(row[-_HEX:])
            continue
        digest, seen = _hash_open(path)
        digests.append(digest)
        fresh.append((path, _key(seen), seen.st_ctime_ns, started, digest))
    if cache is not None and enabled:
        cache.store_many(fresh)
    return digests
