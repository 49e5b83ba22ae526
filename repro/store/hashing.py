"""xxh3-128 of bytes, open files and files by path: the one place a file's bytes are read for a digest
(and a file's SHA-256, where a format outside repro names files by it: attestations, OCI registries).

A big file is read with 1 MiB unbuffered ``readinto`` calls into one reused, page-aligned buffer,
at the speed of the page cache or the disk; a small file with one ``os.read``. The stat cache
(`repro.store.statcache`) and the tree walk (`repro.store.treehash`) build on these.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import xxhash

__all__ = ["READ_SIZE", "copy_hashed", "hash_bytes", "hash_fd", "hash_file"]

# 1 MiB reads measured fastest on a warm page cache (the buffer stays in L2); larger
# buffers only add cache misses, smaller ones add syscalls.
READ_SIZE = 1 << 20

_HEX = 32  # hex digits of an xxh3-128 digest


_local = threading.local()


def _buffer() -> mmap.mmap:
    """This thread's read buffer: page-aligned, because copies from the page cache
    into a misaligned destination (a bytearray's) run several times slower on some CPUs."""
    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = mmap.mmap(-1, READ_SIZE)
    return buf


def hash_bytes(data: bytes) -> str:
    """The xxh3-128 hex digest of `data`."""
    return xxhash.xxh3_128_hexdigest(data)


_O_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


def _hash_open(path: str, on_bytes: Callable[[int], None] | None = None) -> tuple[str, os.stat_result]:
    """The file's xxh3-128 and the stat of the very file that was read.

    Small files take one os.read (a file object costs more than the read itself);
    big ones stream through the reused buffer. A file whose length changed while it
    was read is stat'ed again, so the size recorded is the size read (and its new
    ctime keeps the cache from trusting the row).
    """
    fd = os.open(path, _O_FLAGS)
    try:
        st = os.fstat(fd)
        digest, n = _hash_fd(fd, st.st_size, on_bytes)
        return digest, (st if n == st.st_size else os.fstat(fd))
    finally:
        os.close(fd)


def _hash_fd(fd: int, size: int, on_bytes: Callable[[int], None] | None) -> tuple[str, int]:
    """Hash an open file the stat says holds `size` bytes; (digest, bytes hashed).

    A small file takes one os.read of one byte more than the stat says, which tells
    that the read reached the end; a file that grew, shrank or gave a short read is
    read on to b"". A big one streams through the reused buffer.
    """
    if size < READ_SIZE:
        data = os.read(fd, size + 1)
        if len(data) == size:
            if on_bytes and data:
                on_bytes(len(data))
            return xxhash.xxh3_128_hexdigest(data), size
        return _hash_stream(fd, data, on_bytes)
    return _hash_stream(fd, b"", on_bytes)


def _chunks(fd: int) -> Iterator[memoryview]:
    """An open file's bytes from its offset, one reused buffer's worth at a time (each chunk is valid
    until the next is read)."""
    buf = _buffer()
    view = memoryview(buf)
    try:
        with open(fd, "rb", buffering=0, closefd=False) as f:
            n = f.readinto(buf)
            while n:
                yield view[:n]
                n = f.readinto(buf)
    finally:
        view.release()


def _hash_stream(fd: int, head: bytes, on_bytes: Callable[[int], None] | None) -> tuple[str, int]:
    """Hash `head` and then the rest of the file; (digest, bytes hashed)."""
    h = xxhash.xxh3_128(head)
    total = len(head)
    if on_bytes and head:
        on_bytes(total)
    for chunk in _chunks(fd):
        h.update(chunk)
        total += len(chunk)
        if on_bytes:
            on_bytes(len(chunk))
    return h.hexdigest(), total


def hash_fd(fd: int) -> tuple[str, int]:
    """The xxh3-128 hex digest of an open file's bytes from its current offset, and how many were read.

    Raises:
        OSError: the file cannot be read.
    """
    return _hash_fd(fd, os.fstat(fd).st_size, None)


def copy_hashed(source: int, dest: int) -> tuple[str, int]:
    """Copy an open file's bytes (from its offset) to another open file, hashing them on the way:
    one read of the source for both; the xxh3-128 hex digest and the bytes copied.

    Raises:
        OSError: a read or a write failed.
    """
    h = xxhash.xxh3_128()
    total = 0
    for chunk in _chunks(source):
        h.update(chunk)
        written = 0
        while written < len(chunk):
            written += os.write(dest, chunk[written:])
        total += len(chunk)
    return h.hexdigest(), total


def hash_file(path: str | Path) -> str:
    """The xxh3-128 hex digest of a file's bytes.

    Raises:
        OSError: the file cannot be opened or read.
    """
    return _hash_open(os.fspath(path))[0]


def sha256_file(path: Path) -> str:
    """The SHA-256 hex digest of a file's bytes, read in 1 MiB chunks.

    Raises:
        OSError: the file cannot be opened or read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
