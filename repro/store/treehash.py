"""xxh3-128 of a directory tree: one walk, only changed files read, big files in a thread pool.

A tree the stat cache knows nothing of (a first hash, or no cache) is walked once:
each file is opened relative to its open directory, fstat'ed and read, with no
separate stat, and the cache rows are written every few thousand files. A tree
hashed before is walked with one stat per file relative to its open directory, the
stat cache is read for the whole tree in one range query, only files whose stat
changed are read, and the new rows are written in one transaction. Big files are
hashed in a thread pool (reads and the xxhash binding release the GIL); small files
are hashed in the calling thread while their reads come from the page cache, and in
the pool once reads start waiting on the disk.

A tree that was hashed before is first listed with find(1) (`repro.store.listing`): when
the listing is byte-identical to the one recorded at the last re-check, the recorded
manifest is the answer, with no walk in Python at all. A re-check that walks records
its listing once every file in it is shown unchanged and settled.
"""

from __future__ import annotations

import gc
import os
import stat as stat_mod
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import xxhash

from repro.store import statcache
from repro.store.hashing import _HEX, _O_FLAGS, READ_SIZE, _hash_fd, _hash_stream, hash_bytes
from repro.store.listing import file_keys, tree_listing
from repro.store.record import FileEntry
from repro.store.statcache import HashCache, _key, _Row, _Stat

if TYPE_CHECKING:
    from concurrent.futures import Future

try:
    import resource
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]

__all__ = ["TreeDigest", "gc_paused", "hash_tree", "tree_digest"]

# Files are hashed in batches of about this many bytes so a pool task amortises its cost.
_BATCH_BYTES = 8 << 20
_BATCH_FILES = 256

ProgressFn = Callable[[int, int], None]


@dataclass
class TreeDigest:
    """A tree's files, its stable digest and its total size."""

    files: list[FileEntry]
    digest: str
    size: int


def tree_digest(files: list[FileEntry]) -> str:
    """The xxh3-128 over (path, size, hash) of `files` in path order."""
    return _digest_sorted(sorted(files, key=lambda e: e.path))


def _digest_sorted(files: list[FileEntry]) -> str:
    text = "".join([f"{f.path}\0{f.size}\0{f.hash}\0" for f in files])
    return xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogateescape"))


def _rel(path: str, base: str) -> str:
    rel = os.path.relpath(path, base)
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


_FD_SCANDIR = os.scandir in os.supports_fd and os.stat in os.supports_dir_fd


def _scan(top: str, rel_top: str, exclude: Callable[[str], bool] | None) -> list[_Stat]:
    """Every file under `top` with its stat; symlinked dirs are not followed.

    Directories are opened once and their entries stat'ed relative to the open
    directory, which saves the kernel a full path walk per file.
    """
    found: list[_Stat] = []
    stack = [(top, "" if rel_top == "." else rel_top + "/")]
    while stack:
        d, rd = stack.pop()
        fd = -1
        try:
            if _FD_SCANDIR:
                fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
                it = os.scandir(fd)
            else:
                it = os.scandir(d)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        try:
            with it:
                for e in it:
                    rel = rd + e.name
                    if exclude is not None and exclude(rel):
                        continue
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append((f"{d}/{e.name}", rel + "/"))
                            continue
                        # a regular file, or a symlink to one: recorded by the target's bytes
                        st = e.stat()
                    except OSError:
                        continue  # vanished, or a dangling symlink
                    if stat_mod.S_ISREG(st.st_mode):
                        found.append(_Stat(rel, f"{d}/{e.name}", st.st_size, _key(st), st.st_ctime_ns))
        finally:
            if fd >= 0:
                os.close(fd)
    return found


def _batches(items: list[_Stat]) -> Iterator[list[_Stat]]:
    batch: list[_Stat] = []
    nbytes = 0
    for item in items:
        batch.append(item)
        nbytes += item.size
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


def _hash_known(item: _Stat, on_bytes: Callable[[int], None] | None) -> tuple[str, _Stat]:
    """Hash a file stat'ed by the scan; its stat is taken again only if its length changed.

    A file changed since the scan without a change of length keeps the scan's key: the
    cache row then no longer matches the file's stat, so the next check reads it again.
    """
    fd = os.open(item.path, _O_FLAGS)
    try:
        digest, n = _hash_fd(fd, item.size, on_bytes)
        if n == item.size:
            return digest, item
        st = os.fstat(fd)
        return digest, item._replace(size=n, key=_key(st), ctime_ns=st.st_ctime_ns)
    finally:
        os.close(fd)


# A hashed file: its stat, when its read began (ns), its digest.
_Fresh = tuple[_Stat, int, str]


def _hash_batch(batch: list[_Stat], counter: _Counter | None) -> list[_Fresh]:
    """Hash each file; one that vanished is left out."""
    out: list[_Fresh] = []
    on_bytes = counter.add if counter is not None else None
    started = time.time_ns()  # once per batch: earlier is only stricter about racy rows
    for item in batch:
        try:
            digest, st = _hash_known(item, on_bytes)
        except FileNotFoundError:
            continue
        out.append((st, started, digest))
    return out


def _workers() -> int:
    # Threads overlap disk latency; the xxhash binding and file reads release the GIL.
    return min(8, (os.cpu_count() or 1) * 4)


_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", None) if resource is not None else None


def _waits() -> tuple[float, float, int]:
    """(wall, thread CPU, voluntary context switches of this thread) so far."""
    switches = resource.getrusage(_RUSAGE_THREAD).ru_nvcsw if _RUSAGE_THREAD is not None else 0
    return time.perf_counter(), time.thread_time(), switches


def _io_bound(before: tuple[float, float, int], files: int) -> bool:
    """Whether hashing `files` files since `before` mostly waited on the disk."""
    wall0, cpu0, sw0 = before
    wall, cpu, sw = _waits()
    if _RUSAGE_THREAD is not None:
        # A read served from the page cache never blocks; one from the disk does.
        return sw - sw0 > files // 4
    return wall - wall0 > 2 * (cpu - cpu0) + 0.005


def _hash_todo(
    todo: list[_Stat], done_before: int, total: int, on_progress: ProgressFn | None
) -> list[_Fresh]:
    """Hash the files in `todo`; progress is reported from this thread.

    Big files go to a thread pool at once. Small files are hashed here, in order,
    for as long as their reads come from the page cache (there, a thread pool's GIL
    hand-offs cost more than it saves); once reads wait on the disk, the remaining
    small files go to the pool too, to keep several reads in flight.
    """
    if not todo:
        return []
    # Imported here: a first hash of small files from the page cache never needs a pool.
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    counter = _Counter() if on_progress is not None else None
    big = [s for s in todo if s.size >= READ_SIZE]
    small = [s for s in todo if s.size < READ_SIZE]
    if on_progress is None and len(big) + len(small) == 1:
        return _hash_batch(todo, None)
    results: list[_Fresh] = []
    pending: set[Future[list[_Fresh]]] = set()

    def collect(block: bool) -> None:
        nonlocal pending
        if pending:
            finished, pending = wait(pending, timeout=0.2 if block else 0, return_when=FIRST_COMPLETED)
            for fut in finished:
                results.extend(fut.result())
        if on_progress is not None and counter is not None:
            on_progress(done_before + counter.value, total)

    with ThreadPoolExecutor(max_workers=_workers(), thread_name_prefix="repro-hash") as pool:
        try:
            pending = {pool.submit(_hash_batch, [s], counter) for s in big}
            here = True
            for batch in _batches(small):
                if here:
                    before = _waits()
                    results.extend(_hash_batch(batch, counter))
                    here = not _io_bound(before, len(batch))
                else:
                    pending.add(pool.submit(_hash_batch, batch, counter))
                collect(block=False)
            while pending:
                collect(block=True)
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise
    return results


_O_FLAGS_AT = _O_FLAGS | getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in after the listing never blocks

# Rows of a first hash go to the stat cache in transactions of this many rows: few
# commits, and the rows need not all be held until the end of the walk.
_STORE_ROWS = 8192


def _hash_at(
    dir_fd: int, name: str, path: str, on_bytes: Callable[[int], None] | None
) -> tuple[str | None, os.stat_result] | None:
    """Open a file relative to its open directory, fstat it and hash it: one short path
    lookup and no separate stat. (digest, stat of what was read); the digest is None
    for a big file, which is left for the thread pool; None when the entry is no longer
    a regular file."""
    fd = os.open(name, _O_FLAGS_AT, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode):
            return None
        size = st.st_size
        if size >= READ_SIZE:
            return None, st
        # _hash_fd, inlined for the common case: a small file read whole in one call
        data = os.read(fd, size + 1)
        if len(data) == size:
            if on_bytes is not None and size:
                on_bytes(size)
            return xxhash.xxh3_128_hexdigest(data), st
        digest, n = _hash_stream(fd, data, on_bytes)
        return digest, (st if n == size else os.fstat(fd))
    finally:
        os.close(fd)


class _Walk:
    """A first hash: the tree is walked once and each file hashed as it is listed.

    Each directory's entries are taken in name order and its subdirectories entered in
    that order, so the files come out nearly sorted. Cache rows are written every
    `_STORE_ROWS` files. Small files are hashed in this thread while their reads come
    from the page cache; once reads wait on the disk, the rest of the tree is only
    stat'ed. Those files and the big ones (`later`) are left to `_hash_todo`'s thread
    pool, which keeps several reads in flight.
    """

    def __init__(
        self, cache: HashCache | None, exclude: Callable[[str], bool] | None, counter: _Counter | None
    ) -> None:
        self.cache = cache
        self.exclude = exclude
        self.on_bytes = counter.add if counter is not None else None
        self.found: list[FileEntry] = []
        self.rows: list[_Row] = []
        self.later: list[_Stat] = []
        self.here = True
        self._since = _waits(), 0

    def run(self, top: str, rel_top: str, report: Callable[[], None] | None) -> None:
        """Walk `top` (whose path relative to the base is `rel_top`)."""
        stack = [(top, "" if rel_top == "." else rel_top + "/")]
        while stack:
            d, rd = stack.pop()
            if not self.here:
                self.later += _scan(d, rd[:-1] or ".", self.exclude)
                continue
            try:
                dir_fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            except (FileNotFoundError, NotADirectoryError, PermissionError):
                continue
            try:
                with os.scandir(dir_fd) as it:
                    entries = sorted(it, key=_name)
                subdirs = self._directory(dir_fd, d, rd, entries)
            finally:
                os.close(dir_fd)
            stack += reversed(subdirs)
            if len(self.rows) >= _STORE_ROWS:
                self.store()
            if report is not None:
                report()
        self.store()

    def store(self) -> None:
        if self.cache is not None and self.rows:
            self.cache.store_many(self.rows)
        self.rows = []

    def _directory(
        self, dir_fd: int, d: str, rd: str, entries: list[os.DirEntry[str]]
    ) -> list[tuple[str, str]]:
        """Hash the files of one directory; its subdirectories, to enter next."""
        exclude, on_bytes, found, rows = self.exclude, self.on_bytes, self.found, self.rows
        subdirs = []
        started = time.time_ns()  # once per directory: earlier is only stricter about racy rows
        before, n = self._since  # files hashed here since `before`, across directories
        for e in entries:
            name = e.name
            rel = rd + name
            if exclude is not None and exclude(rel):
                continue
            path = f"{d}/{name}"
            try:
                if e.is_dir(follow_symlinks=False):
                    subdirs.append((path, rel + "/"))
                    continue
                # Only a regular file (or a symlink to one) is opened: opening a device can act.
                if not e.is_file(follow_symlinks=False) and not stat_mod.S_ISREG(e.stat().st_mode):
                    continue
                if not self.here:
                    st = e.stat()
                    self.later.append(_Stat(rel, path, st.st_size, _key(st), st.st_ctime_ns))
                    continue
                done = _hash_at(dir_fd, name, path, on_bytes)
            except OSError:
                continue  # vanished, or a dangling symlink
            if done is not None:
                digest, st = done
                if digest is None:
                    self.later.append(_Stat(rel, path, st.st_size, _key(st), st.st_ctime_ns))
                    continue
                found.append(FileEntry(rel, st.st_size, digest))
                rows.append((path, _key(st), st.st_ctime_ns, started, digest))
            n += 1
            if n == _BATCH_FILES:
                self.here = not _io_bound(before, n)
                before, n = _waits(), 0
        self._since = before, n
        return subdirs


def _name(entry: os.DirEntry[str]) -> str:
    return entry.name


def _rel_of(entry: FileEntry) -> str:
    return entry.path


def _first_hash(
    root_s: str,
    rel_root: str,
    cache: HashCache | None,
    exclude: Callable[[str], bool] | None,
    on_progress: ProgressFn | None,
) -> TreeDigest:
    """Hash a directory the stat cache knows nothing of, in one walk; the total is
    not known before the end, so progress is reported as (bytes done, 0) until then."""
    counter = _Counter() if on_progress is not None else None
    walk = _Walk(cache, exclude, counter)
    report = (
        (lambda: on_progress(counter.value, 0)) if on_progress is not None and counter is not None else None
    )
    walk.run(root_s, rel_root, report)
    found = walk.found
    if walk.later:
        walk.later.sort()
        done = counter.value if counter is not None else 0
        fresh = _hash_todo(walk.later, done, 0, on_progress)
        if cache is not None:
            cache.store_many([(f.path, f.key, f.ctime_ns, t, digest) for f, t, digest in fresh])
        found += [FileEntry(f.rel, f.size, digest) for f, _, digest in fresh]
    found.sort(key=_rel_of)
    size = sum([f.size for f in found])
    if on_progress is not None:
        on_progress(size, size)
    return TreeDigest(files=found, digest=_digest_sorted(found), size=size)


def hash_tree(
    root: Path,
    rel_to: Path,
    cache: HashCache | None = None,
    exclude: Callable[[str], bool] | None = None,
    on_progress: ProgressFn | None = None,
) -> TreeDigest:
    """Hash a file or every file under a directory.

    Paths in the result are relative to `rel_to`, POSIX, sorted. Symlinked
    directories are not followed (a symlinked `root` is); a symlink to a file is
    recorded by its target's content; dangling symlinks are left out. `exclude`
    receives each relative path (directories too: an excluded directory is not
    entered). `on_progress` is called from the calling thread with (bytes done,
    bytes total).

    Raises:
        FileNotFoundError: `root` does not exist.
    """
    with gc_paused():
        return _hash_tree(os.path.abspath(root), os.path.abspath(rel_to), cache, exclude, on_progress)


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic GC while a tree's records are built: they hold no cycles, and on
    100,000 files the collector's passes over them cost a tenth of a re-check (and of a code
    snapshot)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _hash_tree(
    root_s: str,
    base: str,
    cache: HashCache | None,
    exclude: Callable[[str], bool] | None,
    on_progress: ProgressFn | None,
) -> TreeDigest:
    rel_root = _rel(root_s, base)
    use_cache = cache is not None and cache.enabled
    is_dir = os.path.isdir(root_s)
    known_root = is_dir and use_cache and cache is not None and cache.knows(root_s)
    if is_dir and not known_root and _FD_SCANDIR:
        # Nothing to look up: one walk that hashes each file as it finds it.
        return _first_hash(root_s, rel_root, cache if use_cache else None, exclude, on_progress)
    listing: bytes | None = None
    # A first hash takes no listing (it would only slow it down); a re-check records one.
    if known_root and exclude is None:
        listing = tree_listing(root_s)
    if listing is not None:
        assert cache is not None
        known_tree = cache.tree(root_s, base, hash_bytes(listing))
        if known_tree is not None:
            total = sum(f.size for f in known_tree)
            if on_progress is not None:
                on_progress(total, total)
            return TreeDigest(files=known_tree, digest=_digest_sorted(known_tree), size=total)
    if is_dir:
        stats = _scan(root_s, rel_root, exclude)
    else:
        try:
            st = os.stat(root_s)
        except FileNotFoundError:
            raise FileNotFoundError(f"no such file or directory: {root_s}") from None
        regular = stat_mod.S_ISREG(st.st_mode)
        stats = [_Stat(rel_root, root_s, st.st_size, _key(st), st.st_ctime_ns)] if regular else []
    total = sum(s.size for s in stats)

    stats.sort()
    known = cache.lookup_many([s.path for s in stats]) if cache is not None and use_cache else {}
    files: list[FileEntry | None] = []
    todo: list[_Stat] = []
    for s in stats:
        row = known.get(s.path)
        if row is not None and len(row) == len(s.key) + _HEX and row.startswith(s.key):
            files.append(FileEntry(s.rel, s.size, row[-_HEX:]))
        else:
            files.append(None)
            todo.append(s)

    done_cached = total - sum(s.size for s in todo)
    if on_progress is not None:
        on_progress(done_cached, total)
    if todo:
        fresh = _hash_todo(todo, done_cached, total, on_progress)
        if on_progress is not None:
            on_progress(total, total)  # the end, even when a file vanished or shrank meanwhile
        if cache is not None and use_cache:
            cache.store_many([(f.path, f.key, f.ctime_ns, t, digest) for f, t, digest in fresh])
        hashed = {f.path: (f.size, digest) for f, _, digest in fresh}
        for i, s in enumerate(stats):
            if files[i] is None and s.path in hashed:
                files[i] = FileEntry(s.rel, *hashed[s.path])
    entries = [f for f in files if f is not None]
    if listing is not None and len(entries) == len(stats) and _settled(listing, stats):
        assert cache is not None
        cache.store_tree(root_s, base, hash_bytes(listing), entries)
    return TreeDigest(files=entries, digest=_digest_sorted(entries), size=sum(f.size for f in entries))


def _settled(listing: bytes, stats: list[_Stat]) -> bool:
    """Whether the listing (taken before the walk) shows every file exactly as the walk
    stat'ed it, and none was written within the racy window: only then do the hashes
    belong to the listing."""
    keys = file_keys(listing)
    if keys is None or len(keys) != len(stats):
        return False
    newest = max((s.ctime_ns for s in stats), default=0)
    if newest + statcache.RACY_WINDOW_NS >= time.time_ns():
        return False
    return all(keys.get(s.path) == s.key for s in stats)
