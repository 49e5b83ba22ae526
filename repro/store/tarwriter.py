"""Writing a capsule tar: the record, its blobs, the image archive and the data it carries, then
``SHA256SUMS`` (and an optional SIGNATURE and ATTESTATION after it), in a fixed order with fixed
metadata, so the same run always gives the same bytes.

The stream is written by `_TarStream`, not member by member through `tarfile`: each member's
header is built from one template (the bytes `tarfile` writes for it in PAX format: a plain
ustar header for an ASCII name of up to 100 bytes; `tarfile`'s own for any other), a small file
is read whole and hashed in one go, and headers and data are gathered into large blocks, so a
capsule of thousands of small blobs costs a few system calls per member.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from repro.errors import CapsuleInvalid
from repro.store.capsule import (
    IMAGE_MEMBER,
    PYLOCK_MEMBER,
    RECORD_NAME,
    SIGNATURE_NAME,
    SUMS_NAME,
    blob_member,
)
from repro.store.record import Record
from repro.store.recordio import dump_record
from repro.store.verify import blob_digest

_FIXED_MTIME = 0
_BLOCK = tarfile.BLOCKSIZE
_RECORD = tarfile.RECORDSIZE
_GATHER = 1 << 20  # bytes gathered before a write; files up to this size are read whole


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = _FIXED_MTIME
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _header(name: str, size: int) -> bytes:
    """The header `tarfile` writes for ``_tarinfo(name, size)`` in PAX format, built from its own
    header of another member for an ASCII name of up to 100 bytes (a plain ustar header: only the
    name, the size and the checksum differ); `tarfile`'s own for any other."""
    raw = name.encode("ascii", "replace")
    if not name.isascii() or len(raw) > 100 or not 0 <= size < 8**11:
        return _tarinfo(name, size).tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape")
    middle, tail = _template()
    head = b"".join((raw.ljust(100, b"\0"), middle, b"%011o\0" % size, tail))
    checksum = sum(head)  # the checksum field holds eight spaces here, as tarfile counts it
    return b"".join((head[:148], b"%06o\0" % checksum, head[155:]))


@functools.lru_cache(maxsize=1)
def _template() -> tuple[bytes, bytes]:
    """What lies between the name and the size field of `tarfile`'s header, and after the size (the
    checksum field as eight spaces)."""
    ref = _tarinfo("a", 0).tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape")
    return ref[100:124], ref[136:148] + b" " * 8 + ref[156:]


class _TarStream:
    """A tar file written as one stream: members gathered into large writes, then the two zero
    blocks and the padding to a whole record that `tarfile` ends an archive with."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out, self.pending, self.offset = out, bytearray(), 0

    def _put(self, data: bytes | bytearray | memoryview) -> None:
        self.pending += data
        self.offset += len(data)
        if len(self.pending) >= _GATHER:
            self.out.write(self.pending)
            self.pending.clear()

    def add_bytes(self, name: str, data: bytes) -> None:
        self._put(_header(name, len(data)))
        self._put(data)
        self._put(bytes(-len(data) % _BLOCK))

    def add_file(self, name: str, path: Path, blob: bool) -> tuple[str, str | None]:
        """Copy a file in; its SHA-256 and, for a blob, its xxh3-128 (hex), from the same read.

        Raises:
            OSError: it could not be read, or it shrank while it was copied.
        """
        import xxhash

        sha = hashlib.sha256()
        xxh = xxhash.xxh3_128() if blob else None
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            self._put(_header(name, size))
            left = size
            while left:
                chunk = os.read(fd, min(left, _GATHER))
                if not chunk:
                    raise OSError(f"{path}: unexpected end of data (the file shrank while it was read)")
                sha.update(chunk)
                if xxh is not None:
                    xxh.update(chunk)
                self._put(chunk)
                left -= len(chunk)
        finally:
            os.close(fd)
        self._put(bytes(-size % _BLOCK))
        return sha.hexdigest(), xxh.hexdigest() if xxh is not None else None

    def close(self) -> None:
        self._put(bytes(2 * _BLOCK))
        self._put(bytes(-self.offset % _RECORD))
        self.out.write(self.pending)
        self.pending.clear()


def pack(
    record: Record,
    blob_path: Callable[[str], Path],
    dest: Path,
    image_archive: Path | None = None,
    signer: Callable[[bytes], bytes] | None = None,
    attester: Callable[[bytes], tuple[str, bytes]] | None = None,
    data: dict[str, Path] | None = None,
) -> Path:
    """Write a capsule tar: record, referenced blobs, the image archive if given, SHA256SUMS, and
    with ``signer`` a SIGNATURE member made from the SHA256SUMS bytes, with ``attester`` an
    attestation member (its name and bytes) made from them; deterministic bytes. ``data``: the
    blobs of the declared inputs' files (digest → file), carried among the other blobs, each
    once. Each blob is checked against its name as it is copied (one read), so ``blob_path`` need
    not check it first.

    Raises:
        CapsuleInvalid: a blob the record refers to is missing from the store, or replaced.
    """
    members = _members(record, blob_path, image_archive, data or {})
    sums: list[str] = []
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            tar = _TarStream(f)
            for name, src in members:
                if isinstance(src, bytes):
                    tar.add_bytes(name, src)
                    sums.append(f"{hashlib.sha256(src).hexdigest()}  {name}")
                    continue
                digest = blob_digest(name)
                sha, xxh = tar.add_file(name, src, blob=digest is not None)
                if xxh is not None and xxh != digest:
                    raise CapsuleInvalid(
                        f"blob {digest} does not match its content-address name (replaced or corrupt): {src}",
                        member=str(src),
                        hint="the store was changed by hand or damaged; re-import the run's capsule, "
                        "or `repro verify RUN` to check every blob",
                    )
                sums.append(f"{sha}  {name}")
            body = ("\n".join(sums) + "\n").encode()
            tar.add_bytes(SUMS_NAME, body)
            if signer is not None:
                tar.add_bytes(SIGNATURE_NAME, signer(body))
            if attester is not None:
                tar.add_bytes(*attester(body))
            tar.close()
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def _members(
    record: Record,
    blob_path: Callable[[str], Path],
    image_archive: Path | None,
    data: dict[str, Path] | None = None,
) -> list[tuple[str, Path | bytes]]:
    """A capsule's checksummed members in `pack`'s order: the record's bytes, each blob's file (the
    record's and the carried data's, in digest order), the image archive.

    Raises:
        CapsuleInvalid: a blob the record refers to is missing from the store.
    """
    import xxhash

    lists: dict[str, bytes] = {}

    def keep(raw: bytes) -> str:
        digest: str = xxhash.xxh3_128_hexdigest(raw)
        lists[digest] = raw
        return digest

    members: list[tuple[str, Path | bytes]] = [(RECORD_NAME, dump_record(record, keep))]
    data = data or {}
    for digest in sorted(record.blobs() | set(data)):
        if digest in lists:  # a file list: the very bytes the record names
            members.append((blob_member(digest), lists[digest]))
            continue
        path = data[digest] if digest in data else blob_path(digest)
        if not path.is_file():
            raise CapsuleInvalid(
                f"blob {digest} of run {record.id} is missing from the store",
                member=blob_member(digest),
                hint="the store was pruned or damaged; the run cannot be exported whole",
            )
        members.append((blob_member(digest), path))
    if record.deps.pylock_blob and blob_path(record.deps.pylock_blob).is_file():
        members.append((PYLOCK_MEMBER, blob_path(record.deps.pylock_blob)))  # the lock, for `pip`/`uv` users
    if image_archive is not None:
        members.append((IMAGE_MEMBER, image_archive))
    return members


def members(
    record: Record, blob_path: Callable[[str], Path], data: dict[str, Path] | None = None
) -> list[tuple[str, Path | bytes]]:
    """A capsule's checksummed members without an image, as `pack` writes them (name, bytes or file):
    what `repro push` sends as layers.

    Raises:
        CapsuleInvalid: a blob the record refers to is missing from the store.
    """
    return _members(record, blob_path, None, data)


def pack_files(files: list[tuple[str, Path, str]], dest: Path) -> Path:
    """Write a capsule tar of members already on disk (name, file, its SHA-256 hex) and their
    SHA256SUMS: a capsule pulled from a registry, to be read back as any capsule is (`verify_tar`)."""
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    try:
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
            for name, path, _ in files:
                with open(path, "rb") as f:
                    tar.addfile(_tarinfo(name, os.fstat(f.fileno()).st_size), f)
            body = "".join(f"{sha}  {name}\n" for name, _, sha in files).encode()
            tar.addfile(_tarinfo(SUMS_NAME, len(body)), io.BytesIO(body))
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def capsule_sums(record: Record, blob_path: Callable[[str], Path]) -> bytes:
    """The SHA256SUMS that `pack` writes for ``record`` without an image, computed without
    writing a capsule (the same bytes: `pack` is deterministic).

    Raises:
        CapsuleInvalid: a blob the record refers to is missing from the store.
    """
    lines: list[str] = []
    for name, src in _members(record, blob_path, None):
        if isinstance(src, bytes):
            lines.append(f"{hashlib.sha256(src).hexdigest()}  {name}")
            continue
        h = hashlib.sha256()
        with open(src, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        lines.append(f"{h.hexdigest()}  {name}")
    return ("\n".join(lines) + "\n").encode()
