"""Files a run produced, read (and moved back) without following a link the run made.

A run's processes write into the project (or a container's copy of it) and into the run's
runtime directory, and any of them may leave a symbolic link there (``outputs/x ->
/root/.ssh/id_rsa``, ``runtime/metrics.jsonl -> /etc/shadow``, a directory linked to ``/``) or
report a path with ``..`` in it. Every host-side reader of what a run produced goes through
here, under one rule:

- a path the run reported is normalised and must stay inside its root (`inside`);
- below the root, every component is opened relative to its parent directory with
  ``O_NOFOLLOW``: a link anywhere on the way is never followed;
- only a regular file is read; a FIFO or a device is never opened for reading (opened
  non-blocking, refused after ``fstat``), so a read neither blocks nor acts;
- a link is reported as a link (`Found.target`, its target string), never read through; an
  output that is a link is recorded as one (`link_entry`).

The root itself (the project, a declared output directory, the run's work directory) is the
host's choice and is opened as given.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import posixpath
import secrets
import stat as stat_mod
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from repro.runtime.contract import parse_json
from repro.store.hashing import copy_hashed, hash_bytes, hash_fd
from repro.store.record import FileEntry

Kind = Literal["file", "link", "dir", "other"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_ROOT = os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC
_DIR = _ROOT | os.O_NOFOLLOW
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | _CLOEXEC

# The most a report (JSON, JSON lines, a runtime's text note) may hold; a larger one is not read.
MAX_REPORT_BYTES = 256 * 1024 * 1024
MAX_TARGET = 4096  # characters of a link target kept (PATH_MAX)


class NotRegular(OSError):
    """A path that is a link, a directory or a special file where a regular file was to be read."""

    def __init__(self, rel: str, found: Found) -> None:
        super().__init__(f"{rel} is a {found.kind}" + (f" to {found.target}" if found.target else ""))
        self.rel = rel
        self.found = found


@dataclass(frozen=True)
class Found:
    """One entry, seen with ``lstat``: what it is, and a link's target string."""

    rel: str  # relative to its root, POSIX
    kind: Kind
    size: int
    mtime_ns: int
    ino: int
    target: str | None = None  # a link's target, as written

    @property
    def stat(self) -> tuple[int, int, int]:
        """(size, mtime_ns, inode): what a snapshot compares."""
        return self.size, self.mtime_ns, self.ino


def inside(rel: str) -> str | None:
    """A path a run reported, normalised (POSIX, relative); None when it is absolute, empty, holds a
    NUL, or leaves its root (``../x``, ``a/../../x``)."""
    if not rel or "\0" in rel or rel.startswith("/"):
        return None
    norm = posixpath.normpath(rel)
    if norm in (".", "..") or norm.startswith("../"):
        return None
    return norm


def _kind(mode: int) -> Kind:
    if stat_mod.S_ISREG(mode):
        return "file"
    if stat_mod.S_ISLNK(mode):
        return "link"
    return "dir" if stat_mod.S_ISDIR(mode) else "other"


def _target(name: str, dir_fd: int) -> str:
    raw = os.readlink(name, dir_fd=dir_fd)
    # As text a record can hold: undecodable bytes escaped, never more than PATH_MAX.
    text = raw.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text[:MAX_TARGET]


def _found(rel: str, name: str, dir_fd: int, st: os.stat_result) -> Found:
    kind = _kind(st.st_mode)
    target = _target(name, dir_fd) if kind == "link" else None
    return Found(rel, kind, st.st_size, st.st_mtime_ns, st.st_ino, target)


@contextlib.contextmanager
def _parent(root: Path, rel: str) -> Iterator[tuple[int, str]]:
    """The open directory holding ``rel`` (reached without following a link) and the last name.

    Raises:
        FileNotFoundError: ``rel`` leaves its root. OSError: a component is missing, is a link
            (``ELOOP``) or not a directory.
    """
    norm = inside(rel)
    if norm is None:
        raise FileNotFoundError(errno.ENOENT, f"{rel!r} is not a path inside {root}")
    *dirs, name = norm.split("/")
    fd = os.open(root, _ROOT)
    try:
        for part in dirs:
            child = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = child
        yield fd, name
    finally:
        os.close(fd)


class Dirs:
    """Directories opened once for many paths (a run's thousands of outputs): each reached from its
    root without following a link, as `_parent` reaches it, and kept open until `close` (at most
    `MAX_OPEN` at a time). Used as a context manager."""

    MAX_OPEN = 256

    def __init__(self) -> None:
        self.fds: dict[tuple[str, tuple[str, ...]], int] = {}

    def __enter__(self) -> Dirs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    @contextlib.contextmanager
    def parent(self, root: Path, rel: str) -> Iterator[tuple[int, str]]:
        """`_parent`, from the directories already open."""
        norm = inside(rel)
        if norm is None:
            raise FileNotFoundError(errno.ENOENT, f"{rel!r} is not a path inside {root}")
        *dirs, name = norm.split("/")
        yield self._open(str(root), tuple(dirs)), name

    def _open(self, root: str, dirs: tuple[str, ...]) -> int:
        fd = self.fds.get((root, dirs))
        if fd is not None:
            return fd
        if len(self.fds) >= self.MAX_OPEN:
            self.close()
        fd = os.open(dirs[-1], _DIR, dir_fd=self._open(root, dirs[:-1])) if dirs else os.open(root, _ROOT)
        self.fds[(root, dirs)] = fd
        return fd


def _parent_of(root: Path, rel: str, dirs: Dirs | None) -> contextlib.AbstractContextManager[tuple[int, str]]:
    return dirs.parent(root, rel) if dirs is not None else _parent(root, rel)


def find(root: Path, rel: str, dirs: Dirs | None = None) -> Found | None:
    """What ``rel`` is under ``root`` (its own ``lstat``); None when absent, outside the root, or
    only reachable through a link. ``dirs``: directories kept open for a batch of paths."""
    try:
        with _parent_of(root, rel, dirs) as (fd, name):
            return _found(inside(rel) or rel, name, fd, os.stat(name, dir_fd=fd, follow_symlinks=False))
    except OSError:
        return None


def is_file(root: Path, rel: str) -> bool:
    """Whether ``rel`` is a regular file under ``root``, reached without following a link."""
    found = find(root, rel)
    return found is not None and found.kind == "file"


@contextlib.contextmanager
def open_file(root: Path, rel: str, dirs: Dirs | None = None) -> Iterator[int]:
    """An open descriptor of the regular file ``rel`` under ``root``, reached without following a link.

    Raises:
        NotRegular: ``rel`` is a link (``found.target`` names where to), a directory or a special file.
        OSError: it is absent, outside the root, or behind a link.
    """
    with _parent_of(root, rel, dirs) as (dir_fd, name):
        try:
            fd = os.open(name, _FILE, dir_fd=dir_fd)
        except OSError as e:
            st = _lstat(name, dir_fd)
            if st is None or not stat_mod.S_ISLNK(st.st_mode):
                raise
            raise NotRegular(rel, _found(rel, name, dir_fd, st)) from e
        try:
            st = os.fstat(fd)
            if not stat_mod.S_ISREG(st.st_mode):
                raise NotRegular(rel, Found(rel, _kind(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino))
            yield fd
        finally:
            os.close(fd)


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None


def read_bytes(root: Path, rel: str, limit: int | None = MAX_REPORT_BYTES) -> bytes | None:
    """The bytes of the regular file ``rel``; None when it is absent, a link, not a regular file,
    outside its root, or larger than ``limit``."""
    try:
        with open_file(root, rel) as fd:
            if limit is not None and os.fstat(fd).st_size > limit:
                return None
            chunks, total = [], 0
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
                total += len(chunk)
                if limit is not None and total > limit:
                    return None  # it grew past the bound while it was read
            return b"".join(chunks)
    except OSError:
        return None


def read_at(path: Path, limit: int | None = MAX_REPORT_BYTES) -> bytes | None:
    """`read_bytes` of a file the host names by its full path: its directory is the root."""
    return read_bytes(path.parent, path.name, limit)


def read_text(root: Path, rel: str) -> str | None:
    """`read_bytes` decoded as UTF-8 (undecodable bytes replaced)."""
    raw = read_bytes(root, rel)
    return None if raw is None else raw.decode("utf-8", "replace")


def read_json(root: Path, rel: str) -> dict[str, Any]:
    """The JSON object in ``rel``; empty when it is not a readable file or not an object."""
    raw = read_bytes(root, rel)
    try:
        data = parse_json(raw) if raw is not None else None
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def read_stream(root: Path, rel: str, limit: int) -> bytes | None:
    """The whole lines of the JSON-lines file ``rel`` within its first ``limit`` bytes, as
    `read_bytes` opens it (a file that grows without end is read no further); None when it cannot
    be read."""
    try:
        with open_file(root, rel) as fd:
            chunks, left = [], limit + 1  # one byte more tells a file cut there from one that ends there
            while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
                chunks.append(chunk)
                left -= len(chunk)
    except OSError:
        return None
    raw = b"".join(chunks)
    return raw if len(raw) <= limit else raw[: raw.rfind(b"\n", 0, limit) + 1]


def json_lines(root: Path, rel: str, limit: int) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file, read no further than ``limit`` bytes (the last whole
    line before it); a line that is not one (half a line of a killed process) is skipped."""
    found: list[dict[str, Any]] = []
    for line in (read_stream(root, rel, limit) or b"").decode("utf-8", "replace").splitlines():
        try:
            row = parse_json(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            found.append(row)
    return found


@contextlib.contextmanager
def _open_dir(root: Path, rel: str) -> Iterator[int]:
    if rel in ("", "."):
        fd = os.open(root, _ROOT)
    else:
        with _parent(root, rel) as (parent, name):
            fd = os.open(name, _DIR, dir_fd=parent)
    try:
        yield fd
    finally:
        os.close(fd)


def entries(root: Path, rel: str = ".") -> list[Found]:
    """The entries of the directory ``rel`` (reached without following a link), sorted by name;
    empty when it is absent, a link or not a directory."""
    found: list[Found] = []
    prefix = "" if rel in ("", ".") else (inside(rel) or rel) + "/"
    try:
        with _open_dir(root, rel) as fd, os.scandir(fd) as it:
            for e in it:
                with contextlib.suppress(OSError):  # gone since it was listed
                    found.append(_found(prefix + e.name, e.name, fd, e.stat(follow_symlinks=False)))
    except OSError:
        return []
    return sorted(found, key=lambda f: f.rel)


def files(root: Path, pattern: str, rel: str = ".") -> list[str]:
    """The regular files of the directory ``rel`` whose names match the glob ``pattern``, as paths
    relative to ``root``, sorted. Links are never among them."""
    return [
        f.rel
        for f in entries(root, rel)
        if f.kind == "file" and fnmatch.fnmatchcase(posixpath.basename(f.rel), pattern)
    ]


def links(root: Path, rel: str = ".") -> list[Found]:
    """The links among the entries of the directory ``rel``."""
    return [f for f in entries(root, rel) if f.kind == "link"]


def walk(
    root: Path, rel: str = ".", keep_dir: Callable[[str, frozenset[str]], bool] | None = None
) -> Iterator[Found]:
    """Every regular file and every link under the directory ``rel``, directories in name order;
    a link (to a directory too) is yielded as a link and never entered. A directory below is
    entered when ``keep_dir(its rel, the names it holds)`` says so (default: always)."""
    try:
        with _open_dir(root, rel) as fd:
            yield from _walk(
                fd, _listed(fd), "" if rel in ("", ".") else (inside(rel) or rel) + "/", keep_dir
            )
    except OSError:
        return


def _listed(fd: int) -> list[os.DirEntry[str]]:
    with os.scandir(fd) as it:
        return sorted(it, key=lambda e: e.name)


def _walk(
    fd: int,
    listed: list[os.DirEntry[str]],
    prefix: str,
    keep_dir: Callable[[str, frozenset[str]], bool] | None,
) -> Iterator[Found]:
    for rel, name, parent, st in _entries(fd, listed, prefix, keep_dir):
        try:
            yield _found(rel, name, parent, st)
        except OSError:
            continue  # a link gone since it was listed


def _entries(
    fd: int,
    listed: list[os.DirEntry[str]],
    prefix: str,
    keep_dir: Callable[[str, frozenset[str]], bool] | None,
) -> Generator[tuple[str, str, int, os.stat_result], None, None]:
    """(rel, name, its directory's open fd, its own lstat) of every regular file and link below
    ``fd``, directories in name order; a directory is entered when ``keep_dir`` says so (default:
    always) and never through a link. No object per entry: `walk` and `stats` share it."""
    for e in listed:
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue  # gone since it was listed
        rel = prefix + e.name
        if stat_mod.S_ISREG(st.st_mode) or stat_mod.S_ISLNK(st.st_mode):
            yield rel, e.name, fd, st
        elif stat_mod.S_ISDIR(st.st_mode):
            try:
                child = os.open(e.name, _DIR, dir_fd=fd)
            except OSError:
                continue  # gone, or swapped for a link since it was listed
            try:
                inner = _listed(child)
                if keep_dir is None or keep_dir(rel, frozenset(i.name for i in inner)):
                    yield from _entries(child, inner, rel + "/", keep_dir)
            except OSError:
                continue
            finally:
                os.close(child)


def stats(
    root: Path, keep_dir: Callable[[str, frozenset[str]], bool], skip: frozenset[str], limit: int
) -> dict[str, tuple[int, int, int]]:
    """(size, mtime_ns, inode) of every regular file and link `walk` finds under ``root`` (a link's
    own, never followed), keyed by path, but ``skip``; cut short at ``limit`` entries. One ``lstat``
    per entry and no object per entry: what a snapshot of a whole project compares."""
    seen: dict[str, tuple[int, int, int]] = {}
    try:
        with _open_dir(root, ".") as fd, contextlib.closing(_entries(fd, _listed(fd), "", keep_dir)) as found:
            for rel, _, _, st in found:
                if rel not in skip:
                    seen[rel] = (st.st_size, st.st_mtime_ns, st.st_ino)
                    if len(seen) >= limit:
                        break
    except OSError:
        pass
    return seen


# --------------------------------------------------------------------------- outputs


def link_entry(rel: str, target: str) -> FileEntry:
    """The record of an output that is a link: its target string, a digest no file's bytes share."""
    digest = hash_bytes(b"repro.link\0" + target.encode("utf-8", "surrogateescape"))
    return FileEntry(rel, 0, digest, False, link=target)


def entry(
    root: Path,
    rel: str,
    put_fd: Callable[[int], tuple[str, int]] | None,
    max_bytes: int,
    as_rel: str = "",
    dirs: Dirs | None = None,
) -> FileEntry | None:
    """The record of the output ``rel`` under ``root`` (recorded as ``as_rel``, default ``rel``): a
    regular file hashed, its bytes kept through ``put_fd`` up to ``max_bytes``; a link by its target;
    None when it is neither (gone, a directory, a special file, behind a link). ``dirs``:
    directories kept open for a batch of outputs.

    Raises:
        OSError: the file could be opened but not read, or its bytes not stored.
    """
    name = as_rel or rel
    try:
        with open_file(root, rel, dirs) as fd:
            size = os.fstat(fd).st_size
            if put_fd is not None and size <= max_bytes:
                digest, size = put_fd(fd)
                return FileEntry(name, size, digest, True)
            digest, size = hash_fd(fd)
            return FileEntry(name, size, digest, False)
    except NotRegular as e:
        target = e.found.target
        return link_entry(name, target) if e.found.kind == "link" and target is not None else None
    except OSError as e:
        if e.errno in _UNREACHABLE:
            return None
        raise


# Gone, or only reachable through a link: not an output (the link itself is recorded where it is).
_UNREACHABLE = frozenset({errno.ENOENT, errno.ELOOP, errno.ENOTDIR})


# --------------------------------------------------------------------------- moving back


def move(source: Path, dest: Path, rel: str) -> bool:
    """Move the file or link ``rel`` from the tree ``source`` (what a run produced) to the same place
    under ``dest``, making its directories. No link in ``source`` is followed, and a link is moved
    as a link; ``dest`` is the host's own tree (a container cannot write it), its directories are
    taken as they are. False when it could not be moved (gone, behind a link in ``source``, a
    directory or a file in the way).
    """
    norm = inside(rel)
    if norm is None:
        return False
    target = dest / norm
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with _parent(source, norm) as (src_fd, name), _open_dir(target.parent, ".") as dst_fd:
            try:
                os.replace(name, name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
                return True
            except OSError:
                return _copy_over(src_fd, dst_fd, name)
    except OSError:
        return False


def _copy_over(src_fd: int, dst_fd: int, name: str) -> bool:
    """Across file systems: copy (a link as a link) into a new name beside the target, then rename."""
    st = os.stat(name, dir_fd=src_fd, follow_symlinks=False)
    tmp = f".{name[:64]}.{secrets.token_hex(4)}.tmp"
    try:
        if stat_mod.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(name, dir_fd=src_fd), tmp, dir_fd=dst_fd)
        elif stat_mod.S_ISREG(st.st_mode):
            src = os.open(name, _FILE, dir_fd=src_fd)
            try:
                out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dst_fd)
                try:
                    copy_hashed(src, out)
                    os.fchmod(out, stat_mod.S_IMODE(st.st_mode))
                finally:
                    os.close(out)
            finally:
                os.close(src)
            os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=dst_fd, follow_symlinks=False)
        else:
            return False
        os.replace(tmp, name, src_dir_fd=dst_fd, dst_dir_fd=dst_fd)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dst_fd)
        return False
