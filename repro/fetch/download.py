"""Downloading one distribution file into a folder, kept only when its sha256 is one the lock names."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from repro.errors import BuildError, IndexUnreadable
from repro.fetch.index import Link, Reader
from repro.fetch.reach import is_local, local_path, shown

_CHUNK = 1 << 20


class DigestMismatch(BuildError):
    """A source served a file whose sha256 is not one the lock names."""

    def __init__(self, link: Link, got: str) -> None:
        self.link, self.got = link, got
        super().__init__(
            f"{link.name.filename} from {shown(link.source)} has sha256 {got[:16]}…, "
            "which the lockfile does not name",
            hint="the index serves other bytes than were locked: check it, or re-lock with `repro lock`",
        )


def fetch(reader: Reader, link: Link, hashes: set[str], dest: Path) -> tuple[Path, str]:
    """Download ``link`` into ``dest`` under its file name; (path, sha256).

    The file appears in ``dest`` only once its sha256 is one of ``hashes``.

    Raises:
        DigestMismatch: its digest is not among ``hashes``.
        IndexUnreadable: the file cannot be read from its source.
    """
    fd, tmp = tempfile.mkstemp(prefix=".part-", dir=dest)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:

            def write(chunk: bytes) -> None:
                digest.update(chunk)
                out.write(chunk)

            _copy(reader, link, write)
        got = digest.hexdigest()
        if got not in hashes or (link.sha256 is not None and got != link.sha256):
            raise DigestMismatch(link, got)
        final = dest / link.name.filename
        os.replace(tmp, final)
        return final, got
    finally:
        Path(tmp).unlink(missing_ok=True)


def _copy(reader: Reader, link: Link, write: Callable[[bytes], None]) -> None:
    if is_local(link.url):
        try:
            with open(local_path(link.url), "rb") as f:
                while chunk := f.read(_CHUNK):
                    write(chunk)
        except OSError as e:
            raise IndexUnreadable(shown(link.source), f"{link.name.filename}: {e.strerror}") from e
        return
    import requests  # where a remote file is fetched: every command starts without it

    try:
        with reader.session(link.source).get(link.url, stream=True, timeout=reader.sources.timeout) as r:
            r.raise_for_status()
            for chunk in r.iter_content(_CHUNK):
                write(chunk)
    except requests.HTTPError as e:
        status = e.response.status_code if e.response is not None else "?"
        raise IndexUnreadable(shown(link.source), f"{link.name.filename}: HTTP {status}") from e
    except requests.RequestException as e:
        raise IndexUnreadable(shown(link.source), f"{link.name.filename}: {type(e).__name__}") from e
