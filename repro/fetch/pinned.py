"""A lock's pinned files, fetched from the host's sources by name, version and sha256, in parallel."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import Tag

from repro.errors import BuildError, IndexUnreadable
from repro.facts.lockfile import Pinned
from repro.fetch.download import DigestMismatch, fetch
from repro.fetch.index import Link, Reader
from repro.fetch.names import Kind
from repro.fetch.pick import candidates, target_tags
from repro.fetch.reach import shown
from repro.fetch.sources import Sources, host_sources

WORKERS = 8  # project pages and files fetched at once


@dataclass(frozen=True)
class Fetched:
    """A pinned requirement's file, on disk, with the digest it was checked against."""

    key: str
    path: Path
    sha256: str
    kind: Kind


class NotOnIndexes(BuildError):
    """Pinned releases none of the host's sources has a file of (with a digest the lock names)."""

    def __init__(self, missing: list[Pinned], sources: Sources) -> None:
        self.missing = missing
        names = ", ".join(f"{r.name}=={r.version}" for r in missing[:5])
        more = f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""
        looked = ", ".join(shown(s) for s in sources.all()) or "no index (pip's no-index is set)"
        super().__init__(
            f"no file matching the lockfile's hashes on the package indexes for: {names}{more}",
            hint=f"looked in {looked}; re-lock with `repro lock`, or check the host's pip configuration",
        )


def fetch_pinned(
    pinned: list[Pinned],
    dest: Path,
    python_version: str | None = None,
    sources: Sources | None = None,
    on_line: Callable[[str], None] | None = None,
) -> dict[str, Fetched]:
    """Download one file per requirement into ``dest``: a wheel for ``python_version`` (X.Y, default
    the host's) where the release has one, else its source distribution. Each file is kept only
    once its sha256 is one the lock names. Returns {normal name: Fetched}.

    A source that cannot be read is passed over, as pip does, and not asked again; it is the
    error only when some requirement was found nowhere else.

    Raises:
        NotOnIndexes: some requirement has no matching file on any source.
        DigestMismatch: a source served bytes other than its stated, locked digest.
        IndexUnreadable: a source could not be read, and some requirement was found on no other.
    """
    sources = sources if sources is not None else host_sources()
    ranked = target_tags(python_version)
    local = threading.local()
    readers: list[Reader] = []
    lock = threading.Lock()

    def reader() -> Reader:
        if not hasattr(local, "reader"):
            local.reader = Reader(sources)
            with lock:
                readers.append(local.reader)
        r: Reader = local.reader
        return r

    dead = _Dead()

    def one(req: Pinned) -> Fetched | None:
        found = _fetch_one(reader(), req, sources, ranked, dest, dead)
        if found is not None and on_line:
            on_line(f"fetched {found.path.name} ({found.kind})")
        return found

    try:
        with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="repro-fetch") as pool:
            results = list(pool.map(one, pinned))
    finally:
        for r in readers:
            r.close()
    missing = [req for req, got in zip(pinned, results, strict=True) if got is None]
    if missing and dead.first is not None:
        raise dead.first
    if missing:
        raise NotOnIndexes(missing, sources)
    return {got.key: got for got in results if got is not None}


class _Dead:
    """The sources that could not be read, shared by the fetching threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sources: set[str] = set()
        self.first: IndexUnreadable | None = None

    def add(self, source: str, error: IndexUnreadable) -> None:
        with self._lock:
            self.sources.add(source)
            self.first = self.first or error


def _fetch_one(
    reader: Reader, req: Pinned, sources: Sources, ranked: list[Tag], dest: Path, dead: _Dead
) -> Fetched | None:
    """The first candidate that downloads with a locked digest: wheels from every source first,
    then source distributions."""
    sdists: list[Link] = []
    mismatch: DigestMismatch | None = None
    for source in sources.all():
        if source in dead.sources:
            continue
        try:
            links = reader.files(source, req.key)
        except IndexUnreadable as e:
            dead.add(source, e)
            continue
        for link in candidates(links, req, ranked):
            if link.name.kind == "sdist":
                sdists.append(link)
                continue
            got, mismatch = _try(reader, link, req, dest, mismatch)
            if got is not None:
                return got
    for link in sdists:
        got, mismatch = _try(reader, link, req, dest, mismatch)
        if got is not None:
            return got
    if mismatch is not None:
        raise mismatch
    return None


def _try(
    reader: Reader, link: Link, req: Pinned, dest: Path, mismatch: DigestMismatch | None
) -> tuple[Fetched | None, DigestMismatch | None]:
    try:
        path, digest = fetch(reader, link, set(req.hashes), dest)
    except DigestMismatch as e:
        # A file a folder offers without a digest may just be another build of the release;
        # a stated, locked digest that the bytes do not have is the source's fault.
        return None, mismatch or (e if link.sha256 is not None else None)
    return Fetched(req.key, path, digest, link.name.kind), mismatch
