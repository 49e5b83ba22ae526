"""Writing a capsule tar: the record, its blobs, the image archive and the data it carries, then
``SHA256SUMS`` (and an optional SIGNATURE and ATTESTATION after it), in a fixed order with fixed
metadata, so the same run always gives the same bytes.
"""

from __future__ import annotations

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


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = _FIXED_MTIME
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


class _Hashing:
    """A file read once: tarfile copies it into the capsule while its SHA-256 is computed (and its
    xxh3-128, for a blob, to check the bytes against the blob's name on the same read)."""

    def __init__(self, f: IO[bytes], blob: bool) -> None:
        import xxhash

        self.f = f
        self.sha = hashlib.sha256()
        self.xxh = xxhash.xxh3_128() if blob else None

    def read(self, size: int = -1) -> bytes:
        data = self.f.read(size)
        self.sha.update(data)
        if self.xxh is not None:
            self.xxh.update(data)
        return data


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
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
            for name, src in members:
                if isinstance(src, bytes):
                    tar.addfile(_tarinfo(name, len(src)), io.BytesIO(src))
                    sums.append(f"{hashlib.sha256(src).hexdigest()}  {name}")
                else:
                    digest = blob_digest(name)
                    with open(src, "rb") as f:
                        reader = _Hashing(f, blob=digest is not None)
                        tar.addfile(_tarinfo(name, os.fstat(f.fileno()).st_size), reader)
                    if reader.xxh is not None and reader.xxh.hexdigest() != digest:
                        raise CapsuleInvalid(
                            f"blob {digest} does not match its content-address name "
                            f"(replaced or corrupt): {src}",
                            member=str(src),
                            hint="the store was changed by hand or damaged; re-import the run's capsule, "
                            "or `repro verify RUN` to check every blob",
                        )
                    sums.append(f"{reader.sha.hexdigest()}  {name}")
            body = ("\n".join(sums) + "\n").encode()
            tar.addfile(_tarinfo(SUMS_NAME, len(body)), io.BytesIO(body))
            if signer is not None:
                signature = signer(body)
                tar.addfile(_tarinfo(SIGNATURE_NAME, len(signature)), io.BytesIO(signature))
            if attester is not None:
                attested_name, attestation = attester(body)
                tar.addfile(_tarinfo(attested_name, len(attestation)), io.BytesIO(attestation))
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
