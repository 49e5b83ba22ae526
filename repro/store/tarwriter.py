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

import hashlib
import io
import os
import stat
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
from repro.store.hashing import hash_bytes
from repro.store.record import Record
from repro.store.recordio import dump_record

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
    name, the size and the checksum differ; the checksum is the template's sum plus theirs);
    `tarfile`'s own for any other."""
    if size < _MAX_SIZE and len(name) <= 100 and name.isascii() and size >= 0:
        raw = name.encode("ascii")
        size_field = b"%011o\0" % size
        checksum = _SUM + sum(raw) + sum(size_field)
        return b"".join((raw, _NULS[len(raw) :], _MIDDLE, size_field, _MTIME, b"%06o\0 " % checksum, _TAIL))
    return _tarinfo(name, size).tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape")


def _template() -> tuple[bytes, bytes, bytes, int]:
    """The parts of `tarfile`'s header that are the same for every member: what lies between the
    name and the size field, the mtime field, what follows the checksum field; and the sum of
    those with the checksum field as eight spaces (as tarfile counts it)."""
    ref = _tarinfo("a", 0).tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape")
    middle, mtime, tail = ref[100:124], ref[136:148], ref[156:512]
    return middle, mtime, tail, sum(middle) + sum(mtime) + 8 * ord(" ") + sum(tail)


_MIDDLE, _MTIME, _TAIL, _SUM = _template()
_NULS = bytes(100)
_MAX_SIZE = 8**11  # the largest size a plain ustar header holds, plus one
_ZEROS = bytes(_BLOCK)


_OPEN = os.O_RDONLY | os.O_NONBLOCK
_PROBE = 1 << 16  # a blob is first read with one call of this many bytes: most are smaller
_sha256 = hashlib.sha256


def _read_whole(fd: int, size: int, head: bytes, path: Path | str) -> bytes:
    """The ``size`` bytes of an open file whose first bytes, ``head``, were read already.

    Raises:
        OSError: the file ends before ``size`` bytes (it shrank while it was read).
    """
    data = head + os.read(fd, size - len(head)) if size > len(head) else head[:size]
    if len(data) != size:
        raise OSError(f"{path}: unexpected end of data (the file shrank while it was read)")
    return data


class _NotAFile(OSError):
    """What a blob's path names is not a regular file (a directory, a FIFO planted in the store)."""


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
        self._put(_ZEROS[: -len(data) % _BLOCK])

    def add_file(self, name: str, path: Path | str, blob: bool) -> tuple[str, str | None]:
        """Copy a file in; its SHA-256 and, for a blob, its xxh3-128 (hex), from the same read (a
        file of up to a gathered block is read whole).

        A blob is read with one call of up to `_PROBE` bytes, without a stat first: what it holds is
        then checked against its name, so a short read cannot pass. A read that fills the probe or
        finds nothing, and any file not checked so, is stat'ed as the whole file is read.

        Raises:
            OSError: it could not be read, or it shrank while it was copied.
        """
        fd = os.open(path, _OPEN)  # a FIFO planted in the store opens, and is refused
        try:
            data = os.read(fd, _PROBE) if blob else b""
            if not blob or not data or len(data) == _PROBE:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    raise _NotAFile(f"{path}: not a regular file")
                size = st.st_size
                if size > _GATHER:
                    os.lseek(fd, 0, os.SEEK_SET)
                    return self._add_large(name, fd, size, path, blob)
                data = _read_whole(fd, size, data, path)
        finally:
            os.close(fd)
        size = len(data)
        header, pad = _header(name, size), -size % _BLOCK
        pending = self.pending
        pending += header
        pending += data
        pending += _ZEROS[:pad]
        self.offset += len(header) + size + pad
        if len(pending) >= _GATHER:
            self.out.write(pending)
            pending.clear()
        return _sha256(data).hexdigest(), hash_bytes(data) if blob else None

    def _add_large(
        self, name: str, fd: int, size: int, path: Path | str, blob: bool
    ) -> tuple[str, str | None]:
        """`add_file` of a file over a gathered block: copied in chunks, each hashed as it passes."""
        import xxhash

        sha = hashlib.sha256()
        xxh = xxhash.xxh3_128() if blob else None
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
        self._put(_ZEROS[: -size % _BLOCK])
        return sha.hexdigest(), xxh.hexdigest() if xxh is not None else None

    def close(self) -> None:
        self._put(bytes(2 * _BLOCK))
        self._put(bytes(-self.offset % _RECORD))
        self.out.write(self.pending)
        self.pending.clear()


def pack(
    record: Record,
    blob_path: Callable[[str], Path | str],
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
    not check it first, nor that it exists.

    Raises:
        CapsuleInvalid: a blob the record refers to is missing from the store, or replaced.
    """
    entries = _entries(record, blob_path, image_archive, data or {}, check=False)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            tar = _TarStream(f)
            body = "".join(_stream(tar, record, entries)).encode()
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


def _stream(tar: _TarStream, record: Record, entries: list[_Entry]) -> list[str]:
    """Write ``entries`` into ``tar``; their SHA256SUMS lines. Each blob is checked against its name.

    Raises:
        CapsuleInvalid: a blob missing (or not a regular file), or replaced.
    """
    sums: list[str] = []
    for name, src, digest in entries:
        if isinstance(src, bytes):
            tar.add_bytes(name, src)
            sums.append(f"{hashlib.sha256(src).hexdigest()}  {name}\n")
            continue
        try:
            sha, xxh = tar.add_file(name, src, blob=digest is not None)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, _NotAFile) as e:
            if digest is None:
                raise
            raise _missing(record, digest) from e
        if xxh != digest:
            raise CapsuleInvalid(
                f"blob {digest} does not match its content-address name (replaced or corrupt): {src}",
                member=str(src),
                hint="the store was changed by hand or damaged; re-import the run's capsule, "
                "or `repro verify RUN` to check every blob",
            )
        sums.append(f"{sha}  {name}\n")
    return sums


def _missing(record: Record, digest: str) -> CapsuleInvalid:
    return CapsuleInvalid(
        f"blob {digest} of run {record.id} is missing from the store",
        member=blob_member(digest),
        hint="the store was pruned or damaged; the run cannot be exported whole",
    )


# A capsule member: its name, its bytes or the file holding them, and the digest it is checked
# against (a blob's; None for the other files).
_Entry = tuple[str, "Path | str | bytes", "str | None"]


def _entries(
    record: Record,
    blob_path: Callable[[str], Path | str],
    image_archive: Path | None,
    data: dict[str, Path],
    check: bool = True,
) -> list[_Entry]:
    """A capsule's checksummed members in `pack`'s order: the record's bytes, each blob's file (the
    record's and the carried data's, in digest order), the image archive. With ``check``, each blob
    file is first found to exist (`pack` finds that as it opens it).

    Raises:
        CapsuleInvalid: with ``check``, a blob the record refers to is missing from the store.
    """
    lists: dict[str, bytes] = {}

    def keep(raw: bytes) -> str:
        digest = hash_bytes(raw)
        lists[digest] = raw
        return digest

    entries: list[_Entry] = [(RECORD_NAME, dump_record(record, keep), None)]
    for digest in sorted(record.blobs() | set(data)):
        if digest in lists:  # a file list: the very bytes the record names
            entries.append((blob_member(digest), lists[digest], None))
            continue
        path = data[digest] if digest in data else blob_path(digest)
        if check and not os.path.isfile(path):
            raise _missing(record, digest)
        entries.append((blob_member(digest), path, digest))
    if record.deps.pylock_blob and os.path.isfile(pylock := blob_path(record.deps.pylock_blob)):
        entries.append((PYLOCK_MEMBER, pylock, None))  # the lock, for `pip`/`uv` users
    if image_archive is not None:
        entries.append((IMAGE_MEMBER, image_archive, None))
    return entries


def members(
    record: Record, blob_path: Callable[[str], Path], data: dict[str, Path] | None = None
) -> list[tuple[str, Path | bytes]]:
    """A capsule's checksummed members without an image, as `pack` writes them (name, bytes or file):
    what `repro push` sends as layers.

    Raises:
        CapsuleInvalid: a blob the record refers to is missing from the store.
    """
    return [
        (name, Path(src) if isinstance(src, str) else src)
        for name, src, _ in _entries(record, blob_path, None, data or {})
    ]


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
    for name, src, _ in _entries(record, blob_path, None, {}):
        if isinstance(src, bytes):
            lines.append(f"{hashlib.sha256(src).hexdigest()}  {name}")
            continue
        h = hashlib.sha256()
        with open(src, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        lines.append(f"{h.hexdigest()}  {name}")
    return ("\n".join(lines) + "\n").encode()
