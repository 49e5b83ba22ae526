"""A tree's stat data in one pass of find(1): how an unchanged tree is recognised at once.

The listing holds, for every entry under a directory, its type, size, mtime, inode,
ctime and path. Two listings that are byte-identical describe a tree in which no
file was added, removed, renamed or written (a write moves ctime), so hashes
recorded against the first listing still hold. The walk and the stat calls run in
C, split across the CPU cores; Python only hashes the bytes.

Only plain trees qualify: a listing that shows a symbolic link is refused, because
a link's own stat says nothing about the file it points to.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile

# type size mtime inode ctime path, NUL-terminated; times print as seconds with 10 decimals.
_FORMAT = "%y %s %T@ %i %C@ %p\\0"
_TIMEOUT_S = 600


def tree_listing(root: str) -> bytes | None:
    """The listing of every entry under directory ``root`` (absolute), or None when
    there is no usable listing: no find(1), a symbolic link in the tree, an error."""
    find = shutil.which("find")
    if find is None or not os.path.isabs(root):
        return None
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return None
    if not names:
        return b""
    starts = [f"{root}/{name}" for name in names]  # absolute: never read as find options
    parts = max(1, min(os.cpu_count() or 1, 4, len(starts)))
    size = -(-len(starts) // parts)
    groups = [starts[i : i + size] for i in range(0, len(starts), size)]
    # Each find writes to a file of its own: a pipe would stall every find but the one being read.
    with contextlib.ExitStack() as stack:
        sinks = [stack.enter_context(tempfile.TemporaryFile()) for _ in groups]
        try:
            procs = [
                subprocess.Popen(
                    [find, "-P", *group, "-printf", _FORMAT],
                    stdout=sink,
                    stderr=subprocess.DEVNULL,
                    stdin=subprocess.DEVNULL,
                )
                for group, sink in zip(groups, sinks, strict=True)
            ]
        except OSError:
            return None
        failed = False
        for proc in procs:
            try:
                failed = proc.wait(timeout=_TIMEOUT_S) != 0 or failed
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                failed = True
        if failed:
            return None
        outputs = []
        for sink in sinks:
            sink.seek(0)
            outputs.append(sink.read())
    listing = b"".join(outputs)
    if listing.startswith(b"l ") or b"\0l " in listing:
        return None
    return listing


def file_keys(listing: bytes) -> dict[str, str] | None:
    """Regular files of a listing: absolute path → "size:mtime_ns:inode:ctime_ns".

    None when a time does not have the expected form (another find(1)).
    """
    keys: dict[str, str] = {}
    for record in listing.split(b"\0"):
        if not record.startswith(b"f "):
            continue
        try:
            _, size, mtime, inode, ctime, path = record.decode("utf-8", "surrogateescape").split(" ", 5)
        except ValueError:
            return None
        m_ns, c_ns = _ns(mtime), _ns(ctime)
        if m_ns is None or c_ns is None:
            return None
        keys[path] = f"{size}:{m_ns}:{inode}:{c_ns}"
    return keys


def _ns(text: str) -> str | None:
    """`1795232308.5038048750` → `1795232308503804875` (nanoseconds, as digits)."""
    seconds, dot, fraction = text.partition(".")
    if not dot or len(fraction) < 9 or not (seconds + fraction).isdigit():
        return None
    return str(int(seconds + fraction[:9]))
