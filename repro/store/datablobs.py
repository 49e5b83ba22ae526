"""Declared data as content-addressed blobs: which blobs a run's inputs are, where their bytes lie
(an extracted capsule, the store, the shared data remote `store.data_remote`), how they are written
there (a hard link between blob directories where possible, else a copy checked against the name),
and how a replay places them read-only into its own copy of the project.

Every name a record gives is a stranger's: an input or file path must be relative, normalised and
inside its input, nothing is written through a link, and every byte placed is hashed on the way and
compared with the manifest's hash before the file counts as placed.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from repro.errors import CapsuleInvalid, UsageError
from repro.store import limits as rules
from repro.store.capsule import blob_member
from repro.store.hashing import copy_hashed
from repro.store.record import DataInput, FileEntry, Record

ReadBlob = Callable[[str], bytes | None]


def inputs_files(record: Record, read_blob: ReadBlob) -> Iterator[tuple[DataInput, list[FileEntry]]]:
    """Each declared input with its files (inline or from its manifest blob).

    Raises:
        CapsuleInvalid: a manifest blob is missing or malformed.
    """
    for item in record.data.inputs:
        yield item, item.entries(read_blob)


def data_blobs(record: Record, read_blob: ReadBlob) -> dict[str, int]:
    """Every data file's blob digest and size (one entry per distinct content)."""
    return {f.hash: f.size for _, files in inputs_files(record, read_blob) for f in files if f.link is None}


# Where data blobs lie, by kind (`repro.rerun.inputs` adds "here" and "nowhere"; others may come).
CAPSULE = "capsule"  # carried in the capsule being read (`repro export --with-data`)
STORE = "store"  # in this project's store
DATA_REMOTE = "data_remote"  # in the shared data remote (`store.data_remote`)


@dataclass(frozen=True)
class BlobRoots:
    """Where a data blob's bytes may lie, by kind, searched in order: each is a directory holding
    ``blobs/xx/<digest>``."""

    roots: tuple[tuple[str, Path], ...]  # (kind, root): "capsule", "store", "data_remote"

    def find(self, digest: str) -> tuple[str, Path] | None:
        """The first place holding the blob (not yet checked against its name), or None."""
        if not rules.is_digest(digest):
            return None
        for kind, root in self.roots:
            path = root / blob_member(digest)
            if path.is_file() and not path.is_symlink():
                return kind, path
        return None


def blob_roots(capsule: Path | None, store_dir: Path, remote: Path | None) -> BlobRoots:
    """Where data blobs are looked for, in order: an extracted capsule's, the store's, the remote's."""
    found = [(CAPSULE, capsule), (STORE, store_dir), (DATA_REMOTE, remote)]
    return BlobRoots(tuple((kind, root) for kind, root in found if root is not None))


def remote_root(setting: str | None, project_root: Path) -> Path | None:
    """The data remote's directory (`store.data_remote`; relative to the project root), or None."""
    if not setting:
        return None
    path = Path(os.path.expanduser(setting))
    return path if path.is_absolute() else project_root / path


def put(source: Path, digest: str, root: Path) -> Path:
    """Make ``source``'s bytes the blob ``digest`` under ``root`` (no-op when it is there): a hard link
    when ``source`` is itself a blob on the same file system, else a copy hashed on the way; the blob
    is never left under a name its bytes do not match.

    Raises:
        CapsuleInvalid: the bytes do not match ``digest`` (the file changed since it was recorded).
        OSError: the blob could not be written.
    """
    target = root / blob_member(digest)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        if source.name == digest and _try_link(source, tmp):
            os.replace(tmp, target)
            return target
        copy_checked(source, tmp, digest, source.as_posix())
        os.chmod(tmp, 0o444)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _try_link(source: Path, target: Path) -> bool:
    try:
        os.link(source, target, follow_symlinks=False)
        return True
    except OSError:
        return False


def copy_checked(source: Path, target: Path, digest: str, what: str) -> int:
    """Copy a file (never through a link) to a new file, hashing it; the bytes copied.

    Raises:
        CapsuleInvalid: the bytes do not match ``digest``; the new file is removed.
    """
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CapsuleInvalid(f"{what} is not a regular file")
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            found, size = copy_hashed(fd, out)
        finally:
            os.close(out)
    finally:
        os.close(fd)
    if found != digest:
        target.unlink(missing_ok=True)
        raise CapsuleInvalid(
            f"{what} does not match its recorded hash (its bytes were replaced or changed)",
            hint="the data cannot be used as recorded",
        )
    return size


def check_size(total: int, limit: int, flag: str) -> None:
    """Refuse data over the size the user allowed.

    Raises:
        UsageError: ``total`` is over ``limit``.
    """
    if total > limit:
        raise UsageError(
            f"the declared data is {total:,} bytes, over the limit of {limit:,} bytes",
            hint=f"raise it with {flag} BYTES (or 2GiB, 500MiB), or leave the data out",
        )


def safe_entries(item: DataInput, files: list[FileEntry]) -> list[FileEntry]:
    """An input's files, each checked to be a plain file path inside the input.

    Raises:
        CapsuleInvalid: an unsafe input path, a file outside its input, a link.
    """
    if not rules.is_safe_relpath(item.path):
        raise CapsuleInvalid(f"data input {item.path!r} is not a relative path inside the project")
    for f in files:
        inside = f.path == item.path or f.path.startswith(item.path.rstrip("/") + "/")
        if not rules.is_safe_relpath(f.path) or not inside:
            raise CapsuleInvalid(f"data input {item.path} names a file outside it: {f.path!r}")
        if f.link is not None:
            raise CapsuleInvalid(f"data input {item.path} names a link: {f.path!r}")
        if not rules.is_digest(f.hash):
            raise CapsuleInvalid(f"data file {f.path} has no content digest")
    return files


def place(files: list[FileEntry], dest: Path, source_of: Callable[[FileEntry], Path], limit: int) -> int:
    """Write each file at its recorded path under ``dest`` (a replay's scratch copy), read-only, its
    bytes hashed on the way and compared with the manifest; the bytes placed.

    Nothing is written through a link or over an existing file: ``dest``'s own directories are
    checked on the way down.

    Raises:
        CapsuleInvalid: a path that is a link or a file on the way, a file already there, bytes that
            do not match the manifest, more bytes than ``limit``.
        OSError: a file could not be written.
    """
    total = sum(f.size for f in files)
    if total > limit:
        raise CapsuleInvalid(
            f"the carried data is {total:,} bytes, over the limit of {limit:,} bytes",
            hint="raise it with --max-data-size BYTES",
        )
    placed = 0
    for f in sorted(files, key=lambda e: e.path):
        target = _target(dest, f.path)
        placed += copy_checked(source_of(f), target, f.hash, f"data file {f.path}")
        os.chmod(target, 0o444)
    return placed


def clear(dest: Path, rel: str) -> None:
    """Remove what the replay's copy holds at ``rel`` (a restored file where an input goes), never
    following a link on the way.

    Raises:
        CapsuleInvalid: a link or file on the way to ``rel``.
    """
    target = parent_dir(dest, rel) / rel.split("/")[-1]
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)


def _target(dest: Path, rel: str) -> Path:
    """``dest / rel`` with its directories made, refusing any link or file on the way and any
    file already at the end."""
    target = parent_dir(dest, rel) / rel.split("/")[-1]
    if os.path.lexists(target):
        raise CapsuleInvalid(f"data path {rel!r} is already taken in the replay's copy")
    return target


def parent_dir(dest: Path, rel: str, where: str = "the replay's copy") -> Path:
    """The directory ``rel`` goes into under ``dest``, made where missing, refusing links and files
    (``where`` names ``dest`` in the error).

    Raises:
        CapsuleInvalid: a directory on the way is a link or a file.
    """
    current = dest
    for part in rel.split("/")[:-1]:
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            current.mkdir()
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise CapsuleInvalid(f"path {rel!r} passes through a link or file in {where}")
    return current
