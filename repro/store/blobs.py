"""The content-addressed blobs of a store: ``.repro/blobs/ab/abcdef…``, each file stored once under the
xxh3-128 of its bytes, and read back only after its bytes were checked against that name.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from repro.errors import CapsuleInvalid
from repro.store import atomic
from repro.store.capsule import blob_member
from repro.store.hashing import copy_hashed, hash_bytes, hash_file
from repro.store.processes import pid_alive
from repro.store.verify import read_list_file

_SMALL = 1 << 20  # `BlobStore.put_fd` reads a file up to this size whole, hashes it, and writes it once


class BlobStore:
    """The ``blobs/`` tree of one store directory (``.repro/``)."""

    def __init__(self, store_dir: Path) -> None:
        self.dir = store_dir
        self.blobs_dir = store_dir / "blobs"

    def blob_path(self, digest: str) -> Path:
        return self.dir / blob_member(digest)

    def has_blob(self, digest: str) -> bool:
        return self.blob_path(digest).is_file()

    def put_bytes(self, data: bytes) -> str:
        """Store bytes once; returns their digest."""
        digest = hash_bytes(data)
        if not os.path.isfile(f"{self.dir}/{blob_member(digest)}"):  # one stat, no Path: once per output
            write_atomic(self.blob_path(digest), data)
        return digest

    def put_file(self, path: str | Path, digest: str | None = None) -> str:
        """Store a file's bytes once (hashing it unless its digest is known); returns the digest of
        the bytes stored: a file that changed since ``digest`` was taken (a log still growing) is
        stored under the digest of what was copied, so no blob's name ever lies."""
        digest = digest or hash_file(path)
        stored = f"{self.blobs_dir}/{digest[:2]}/{digest}"  # `blob_path` as a string: one stat per code file
        if os.path.isfile(stored):
            return digest
        return self.copy_blob(path, digest)

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
        tmp = self.blobs_dir / "00" / f".put-{os.urandom(6).hex()}.{os.getpid()}.tmp"
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
            raise named(e, tmp) from e
        finally:
            tmp.unlink(missing_ok=True)  # a full disk leaves no partial blob behind

    def copy_blob(self, source: str | Path, digest: str) -> str:
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
            raise named(e, target) from e
        finally:
            tmp.unlink(missing_ok=True)  # a full disk leaves no partial blob behind
        return digest

    def read_list(self, digest: str) -> bytes | None:
        """A file-list blob's bytes (`read_list_blob`); None when missing."""
        return read_list_blob(self.dir, digest)

    def read_blob(self, digest: str | None) -> bytes | None:
        """A blob's bytes, checked against its name; None when it is missing.

        Raises:
            CapsuleInvalid: the bytes do not match the name.
        """
        if not digest:
            return None
        return read_checked(self.blob_path(digest), digest)

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


def write_atomic(target: Path, data: bytes) -> None:
    """Write a file whole or not at all.

    Raises:
        OSError: the write failed (naming the file).
    """
    try:
        atomic.write_bytes(target, data)
    except OSError as e:
        raise named(e, target) from e


def replaced_blob(digest: str, path: Path) -> CapsuleInvalid:
    """The error for a blob whose bytes do not match its name."""
    return CapsuleInvalid(
        f"blob {digest} does not match its content-address name (replaced or corrupt): {path}",
        member=str(path),
        hint="the store was changed by hand or damaged; re-import the run's capsule, "
        "or `repro verify RUN` to check every blob",
    )


def read_list_blob(blob_root: Path, digest: str) -> bytes | None:
    """A file-list blob under ``blob_root`` (`verify.read_list_file`): refused over
    `limits.MAX_LIST_BYTES` before it is read, checked against its name; None when missing.

    Raises:
        CapsuleInvalid: too large, or bytes that do not match the name.
    """
    return read_list_file(blob_root / blob_member(digest), digest)


def read_checked(path: Path, digest: str) -> bytes | None:
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


def named(e: OSError, path: Path) -> OSError:
    """The error with the path it concerns (a failed write() does not say which file)."""
    if e.filename is not None:
        return e
    return type(e)(e.errno, e.strerror, str(path)) if e.errno is not None else OSError(str(e), str(path))
