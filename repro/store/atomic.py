"""Writing a file so that a reader (or a process started after a crash) sees the old file or the
whole new one, never a part: write a temporary file beside it, then rename it over the target."""

from __future__ import annotations

import os
from pathlib import Path


def write_bytes(target: Path, data: bytes) -> None:
    """Replace ``target`` with ``data`` in one step; the temporary file never outlives the call.

    Raises:
        OSError: the file could not be written (a full disk, no permission).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
