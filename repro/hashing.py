"""xxh3-128 of bytes, files and trees, with a stat cache in SQLite.

Files are read with large unbuffered ``readinto`` calls into one reused buffer, so a
big file hashes at the speed of the page cache or the disk. A tree is walked once,
every file is stat'ed, the stat cache is read for the whole tree in one query, only
files whose stat changed are read again (in a thread pool: the xxhash binding and
file reads release the GIL), and the new cache rows are written in one transaction.

The cache key is (absolute path, size, mtime_ns, inode, ctime_ns). A file modified
with the same size and its mtime forced back still misses, because its ctime (and,
when replaced, its inode) changed. A row whose file changed within the timestamp
granularity of the moment it was hashed is "racy" (git's term) and is not trusted:
that file is read again on the next check, after which its row is safe.
"""

from __future__ import annotations

import os
import sqlite3
import stat as stat_mod
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import xxhash

from repro.capsule import FileEntry

__all__ = [
    "HashCache",
    "TreeDigest",
    "hash_bytes",
    "hash_file",
    "hash_file_cached",
    "hash_tree",
]

# 1 MiB reads measured fastest on a warm page cache (the buffer stays in L2); larger
# buffers only add cache misses, smaller ones add syscalls.
READ_SIZE = 1 << 20
# A stat row is trusted only when the file's ctime is older than the moment it was
# hashed by more than this: it covers coarse kernel clocks and 2 s FAT/SMB timestamps.
RACY_WINDOW_NS = 2_000_000_000
# Files are hashed in batches of about this many bytes so a pool task amortises its cost.
_BATCH_BYTES = 8 << 20
_BATCH_FILES = 256
_CACHE_FORMAT = 1

ProgressFn = Callable[[int, int], None]

_local = threading.local()


def _buffer() -> bytearray:
    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = bytearray(READ_SIZE)
    return buf


def hash_bytes(data: bytes) -> str:
    """The xxh3-128 hex digest of `data`."""
    return xxhash.xxh3_128_hexdigest(data)


def _hash_open(path: str, on_bytes: Callable[[int], None] | None = None) -> tuple[str, os.stat_result]:
    """The file's xxh3-128 and the stat of the very file that was read."""
    with open(path, "rb", buffering=0) as f:
        st = os.fstat(f.fileno())
        buf = _buffer()
        n = f.readinto(buf)
        if n is None or n < READ_SIZE:
            # The whole file fitted in one read: no streaming state needed.
            if on_bytes and n:
                on_bytes(n)
            return xxhash.xxh3_128_hexdigest(memoryview(buf)[: n or 0]), st
        h = xxhash.xxh3_128()
        view = memoryview(buf)
        while n:
            h.update(view[:n])
            if on_bytes:
                on_bytes(n)
            n = f.readinto(buf)
        return h.hexdigest(), st


def hash_file(path: Path) -> str:
    """The xxh3-128 hex digest of a file's bytes.

    Raises:
        OSError: the file cannot be opened or read.
    """
    return _hash_open(os.fspath(path))[0]


# --------------------------------------------------------------------------- stat cache

_StatKey = tuple[int, int, int, int]  # size, mtime_ns, inode, ctime_ns


def _stat_key(st: os.stat_result) -> _StatKey:
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def _encodable(path: str) -> bool:
    # Names that are not valid UTF-8 (surrogate-escaped) cannot be SQLite TEXT; they are hashed uncached.
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _prefix_range(prefix: str) -> tuple[str, str]:
    """Bounds [lo, hi) of the paths strictly under directory `prefix`; "0" sorts just after "/"."""
    base = prefix.rstrip("/")
    return base + "/", base + "0"


class HashCache:
    """A stat cache: (absolute path, size, mtime_ns, inode, ctime_ns) → xxh3-128.

    Safe for concurrent processes (WAL journal, busy timeout). The cache only ever
    saves work: when its database cannot be opened or written, hashing goes on
    without it.
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
        conn = sqlite3.connect(os.fspath(self.db_path), timeout=30.0, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != _CACHE_FORMAT:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DROP TABLE IF EXISTS stat_cache")
                conn.execute(
                    "CREATE TABLE stat_cache (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER,"
                    " inode INTEGER, ctime_ns INTEGER, hashed_ns INTEGER, hash TEXT) WITHOUT ROWID"
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

    def lookup_many(self, paths: list[str]) -> dict[str, tuple[_StatKey, str]]:
        """The trusted rows for `paths` (absolute): path → (stat key, hash).

        One range query over the paths' common directory; rows there whose file no
        longer exists are dropped.
        """
        paths = [p for p in paths if _encodable(p)]
        if self._conn is None or not paths:
            return {}
        rows: dict[str, tuple[_StatKey, str]] = {}
        wanted = set(paths)
        gone: list[tuple[str]] = []
        try:
            if len(paths) == 1:
                cur = self._conn.execute("SELECT * FROM stat_cache WHERE path = ?", (paths[0],))
            else:
                lo, hi = _prefix_range(os.path.commonpath(paths))
                cur = self._conn.execute("SELECT * FROM stat_cache WHERE path >= ? AND path < ?", (lo, hi))
            for path, size, mtime_ns, inode, ctime_ns, hashed_ns, digest in cur:
                if path not in wanted:
                    if not os.path.lexists(path):
                        gone.append((path,))
                elif ctime_ns + RACY_WINDOW_NS < hashed_ns:
                    rows[path] = ((size, mtime_ns, inode, ctime_ns), digest)
            if gone:
                self._write("DELETE FROM stat_cache WHERE path = ?", gone)
        except sqlite3.Error:
            return {}
        return rows

    def store_many(self, items: list[tuple[str, _StatKey, int, str]]) -> None:
        """Write rows (absolute path, stat key, hashed-at ns, hash) in one transaction."""
        self._write(
            "INSERT OR REPLACE INTO stat_cache VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(p, k[0], k[1], k[2], k[3], t, h) for p, k, t, h in items if _encodable(p)],
        )

    def _write(self, sql: str, rows: Sequence[tuple[object, ...]]) -> None:
        if self._conn is None or not rows:
            return
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(sql, rows)
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


def hash_file_cached(path: Path, cache: HashCache | None) -> str:
    """A file's xxh3-128, read from the stat cache when its stat is unchanged.

    Raises:
        OSError: the file cannot be stat'ed, opened or read.
    """
    if cache is None or not cache.enabled:
        return hash_file(path)
    abspath = os.path.abspath(path)
    key = _stat_key(os.stat(abspath))
    row = cache.lookup_many([abspath]).get(abspath)
    if row is not None and row[0] == key:
        return row[1]
    started = time.time_ns()
    digest, st = _hash_open(abspath)
    cache.store_many([(abspath, _stat_key(st), started, digest)])
    return digest


# --------------------------------------------------------------------------- trees


@dataclass
class TreeDigest:
    """A tree's files, its stable digest and its total size."""

    files: list[FileEntry]
    digest: str
    size: int


def tree_digest(files: list[FileEntry]) -> str:
    """The xxh3-128 over (path, size, hash) of `files` in path order."""
    h = xxhash.xxh3_128()
    for f in sorted(files, key=lambda e: e.path):
        h.update(f"{f.path}\0{f.size}\0{f.hash}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _rel(path: str, base: str) -> str:
    rel = os.path.relpath(path, base)
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


def _walk(top: str, rel_top: str, exclude: Callable[[str], bool] | None) -> Iterator[tuple[str, str]]:
    """(absolute path, relative POSIX path) of every file under `top`, symlinked dirs not followed."""
    stack = [(top, rel_top)]
    while stack:
        d, rd = stack.pop()
        try:
            it = os.scandir(d)
        except (FileNotFoundError, NotADirectoryError):
            continue
        with it:
            for e in it:
                rel = f"{rd}/{e.name}" if rd and rd != "." else e.name
                if exclude is not None and exclude(rel):
                    continue
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append((e.path, rel))
                    elif e.is_file(follow_symlinks=True):
                        # a regular file, or a symlink to one: recorded by the target's bytes
                        yield e.path, rel
                except OSError:
                    continue


def _stat_all(paths: list[tuple[str, str]]) -> list[tuple[str, str, _StatKey]]:
    out = []
    for p, rel in paths:
        try:
            st = os.stat(p)
        except FileNotFoundError:
            continue  # vanished between the walk and the stat
        if stat_mod.S_ISREG(st.st_mode):
            out.append((p, rel, _stat_key(st)))
    return out


def _batches(items: list[tuple[str, _StatKey]]) -> Iterator[list[tuple[str, _StatKey]]]:
    batch: list[tuple[str, _StatKey]] = []
    nbytes = 0
    for item in items:
        batch.append(item)
        nbytes += item[1][0]
        if nbytes >= _BATCH_BYTES or len(batch) >= _BATCH_FILES:
            yield batch
            batch, nbytes = [], 0
    if batch:
        yield batch


class _Counter:
    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.value += n


def _hash_batch(
    batch: list[tuple[str, _StatKey]], counter: _Counter | None
) -> list[tuple[str, _StatKey, int, str]]:
    out = []
    on_bytes = counter.add if counter is not None else None
    for p, _ in batch:
        started = time.time_ns()
        digest, st = _hash_open(p, on_bytes)
        out.append((p, _stat_key(st), started, digest))
    return out


def _workers() -> int:
    # Threads overlap I/O latency and os calls; the xxhash binding releases the GIL.
    return min(8, (os.cpu_count() or 1) * 2)


def hash_tree(
    root: Path,
    rel_to: Path,
    cache: HashCache | None = None,
    exclude: Callable[[str], bool] | None = None,
    on_progress: ProgressFn | None = None,
) -> TreeDigest:
    """Hash a file or every file under a directory.

    Paths in the result are relative to `rel_to`, POSIX, sorted. Symlinked
    directories are not followed; a symlink to a file is recorded by its target's
    content; dangling symlinks are left out. `exclude` receives each relative path
    (directories too: an excluded directory is not entered). `on_progress` is called
    from the calling thread with (bytes done, bytes total).

    Raises:
        FileNotFoundError: `root` does not exist.
    """
    root_s = os.path.abspath(root)
    base = os.path.abspath(rel_to)
    if not os.path.exists(root_s):
        raise FileNotFoundError(f"no such file or directory: {root}")
    rel_root = _rel(root_s, base)
    if os.path.isdir(root_s):
        listed = list(_walk(root_s, rel_root, exclude))
    else:
        listed = [(root_s, rel_root)]
    stats = _stat_all(listed)
    total = sum(k[0] for _, _, k in stats)

    usable = cache is not None and cache.enabled
    known = cache.lookup_many([p for p, _, _ in stats]) if cache is not None and usable else {}
    found: dict[str, tuple[int, str]] = {}
    todo: list[tuple[str, _StatKey]] = []
    for p, _, key in stats:
        row = known.get(p)
        if row is not None and row[0] == key:
            found[p] = (key[0], row[1])
        else:
            todo.append((p, key))

    done_cached = total - sum(k[0] for _, k in todo)
    if on_progress is not None:
        on_progress(done_cached, total)
    fresh = _hash_todo(todo, done_cached, total, on_progress)
    for p, key, _, digest in fresh:
        found[p] = (key[0], digest)
    if cache is not None and usable:
        cache.store_many(fresh)

    files = [FileEntry(path=rel, size=found[p][0], hash=found[p][1]) for p, rel, _ in stats if p in found]
    files.sort(key=lambda e: e.path)
    return TreeDigest(files=files, digest=tree_digest(files), size=sum(f.size for f in files))


def _hash_todo(
    todo: list[tuple[str, _StatKey]], done_before: int, total: int, on_progress: ProgressFn | None
) -> list[tuple[str, _StatKey, int, str]]:
    """Hash the files in `todo`, skipping ones that vanish; progress from this thread."""
    if not todo:
        return []
    counter = _Counter() if on_progress is not None else None
    batches = list(_batches(todo))
    if len(batches) == 1 and on_progress is None:
        return _hash_batch_tolerant(batches[0], None)
    results: list[tuple[str, _StatKey, int, str]] = []
    with ThreadPoolExecutor(max_workers=_workers(), thread_name_prefix="repro-hash") as pool:
        pending: set[Future[list[tuple[str, _StatKey, int, str]]]] = {
            pool.submit(_hash_batch_tolerant, b, counter) for b in batches
        }
        while pending:
            finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for fut in finished:
                results.extend(fut.result())
            if on_progress is not None and counter is not None:
                on_progress(done_before + counter.value, total)
    return results


def _hash_batch_tolerant(
    batch: list[tuple[str, _StatKey]], counter: _Counter | None
) -> list[tuple[str, _StatKey, int, str]]:
    try:
        return _hash_batch(batch, counter)
    except FileNotFoundError:
        # A file vanished mid-way: hash the rest one by one, leaving it out.
        out = []
        for item in batch:
            try:
                out.extend(_hash_batch([item], None))
            except FileNotFoundError:
                continue
        return out
