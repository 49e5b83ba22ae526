"""Reading recorded blobs for a diff: cached, and a failing read counts as a missing blob."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

ReadBlob = Callable[[str], "bytes | None"]
OpenBlob = Callable[[str], "Path | None"]  # a stored blob's file, for formats read by path


class SafeReader:
    """read_blob with caching, where a failing reader counts as a missing blob."""

    def __init__(self, read_blob: ReadBlob) -> None:
        self._read = read_blob
        self._cache: dict[str, bytes | None] = {}

    def __call__(self, digest: str | None) -> bytes | None:
        if not digest:
            return None
        if digest not in self._cache:
            try:
                self._cache[digest] = self._read(digest)
            except (OSError, KeyError, ValueError):
                self._cache[digest] = None
        return self._cache[digest]

    def text(self, digest: str | None) -> str | None:
        raw = self(digest)
        return None if raw is None else raw.decode("utf-8", errors="replace")
