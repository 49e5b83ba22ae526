"""Where each pinned release's files lie on the host's package sources: the URLs a PEP 751
pylock.toml names for a hash-pinned lock (which states digests, not places).

A file counts only when its sha256 is one the lock names: stated by the index, or (a
find-links folder on this machine, which states none) taken from the file itself. The
sources are asked in pip's order, those on this machine first, and the next one only for
what is still missing, so a lock whose files lie here is placed without the network.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from repro.errors import BuildError, IndexUnreadable, ReproError, UsageError, from_os_error
from repro.facts.lockfile import Pinned, cache_dir, parse_lockfile
from repro.facts.projectlock import file_sha256, kind_of
from repro.fetch.reach import local_path
from repro.fetch.sources import CONFIG_HINT, Sources, host_sources
from repro.store import atomic

if TYPE_CHECKING:
    from repro.facts.projectlock.pylock import File
    from repro.fetch.index import Link, Reader


def locate(pinned: list[Pinned], sources: Sources | None = None) -> dict[str, list[File]]:
    """{normal name: the files of its pinned release whose digest the lock names}.

    Raises:
        BuildError: a release none of whose locked files is on any source.
    """
    from repro.fetch.index import Reader  # the index reader (packaging's tags): not for a cached lock

    sources = sources if sources is not None else host_sources()
    reader = Reader(sources)
    found: dict[str, list[File]] = {}
    try:
        for req in pinned:
            found[req.key] = _files(reader, sources, req)
    finally:
        reader.close()
    missing = [f"{r.key}=={r.version}" for r in pinned if not found[r.key]]
    if missing:
        raise BuildError(
            f"no file with a locked digest on the package sources for: {', '.join(missing[:6])}",
            hint=CONFIG_HINT,
        )
    return found


def _files(reader: Reader, sources: Sources, req: Pinned) -> list[File]:
    from repro.facts.projectlock.pylock import File  # packaging's markers: not for a cached lock

    wanted = set(req.hashes)
    for source in sources.all():
        try:
            links = reader.files(source, req.key)
        except IndexUnreadable:
            continue
        got = {}
        for link in links:
            digest = _digest(link) if _same_version(link, req.version) else None
            if digest in wanted:
                got[digest] = File(link.name.filename, link.url, digest)
        if got:
            return [got[d] for d in sorted(got)]
    return []


def _same_version(link: Link, version: str) -> bool:
    try:
        return link.name.version == Version(version)
    except InvalidVersion:
        return False


def _digest(link: Link) -> str | None:
    if link.sha256 is not None:
        return link.sha256
    if link.url.startswith("file:"):
        return file_sha256(Path(local_path(link.url)))
    return None  # a remote file with no stated digest is not downloaded to learn it


def pylock_text(lock_text: str, sources: Sources | None = None) -> str:
    """A hash-pinned requirements lock as a PEP 751 pylock.toml.

    Raises:
        BuildError: a lock entry without a pin or a hash; a release with no file on the sources.
    """
    from repro.facts.projectlock.pylock import dumps

    pinned = parse_lockfile(lock_text)
    files = locate(pinned, sources)
    rows = [(p.key, p.version, p.marker, files[p.key]) for p in sorted(pinned, key=lambda p: p.key)]
    return dumps(rows)


def write_pylock(lock_text: str, dest: Path, sources: Sources | None = None) -> None:
    """Write ``lock_text`` (a hash-pinned lock) to ``dest`` as a PEP 751 pylock.toml.

    Raises:
        UsageError: a file name PEP 751 does not allow. BuildError: a release with no file on the
        sources. OSFailure: ``dest`` cannot be written.
    """
    if kind_of(dest) != "pylock.toml":
        raise UsageError(
            f"{dest.name} is not a pylock file name",
            hint="PEP 751 names them pylock.toml or pylock.NAME.toml",
        )
    text = pylock_text(lock_text, sources)
    try:
        atomic.write_bytes(dest, text.encode())
    except OSError as e:
        raise from_os_error(e, dest) from e


NONE_FOUND_FOR_S = 24 * 3600  # a lock whose files the sources lacked is looked up again after a day


def cached_pylock(lock_text: str, sources: Sources | None = None) -> str | None:
    """``lock_text`` as a pylock.toml, kept in repro's cache by the lock's digest; None when some
    release has no file on the sources (or they cannot be read): a run goes on without one. That
    answer is kept too, for ``NONE_FOUND_FOR_S``, so each run does not read the sources again."""
    digest = hashlib.sha256(lock_text.encode()).hexdigest()
    cached = cache_dir() / "pylock" / f"{digest}.toml"
    none_found = cached.with_suffix(".none")
    try:
        return cached.read_text()
    except OSError:
        pass
    try:
        if time.time() - none_found.stat().st_mtime < NONE_FOUND_FOR_S:
            return None
    except OSError:
        pass
    try:
        text = pylock_text(lock_text, sources)
    except ReproError as e:
        _keep(none_found, f"{e}\n")
        return None
    _keep(cached, text)
    return text


def _keep(path: Path, text: str) -> None:
    try:
        atomic.write_bytes(path, text.encode())
    except OSError:
        pass  # only the next run's time is lost
