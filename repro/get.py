"""`repro get`: a run's files written out of the store (or a capsule), each checked against its hash.

The paths come from a record, a stranger's when it is a capsule: each must be a plain relative path,
nothing is written through a link or outside the destination, and nothing there is replaced without
``force``. An output the store did not keep (over `store.max_output_bytes`, or removed by `gc`) is
named, never invented; a link the run made is reported with its target, never recreated.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from repro.errors import CapsuleInvalid, NotFoundError, UsageError
from repro.store import limits as rules
from repro.store.datablobs import copy_checked, parent_dir
from repro.store.record import FileEntry, Record
from repro.store.runs import LoadedRun


@dataclass
class GetResult:
    """What `get_files` did: files written, outputs not kept, links reported."""

    run: str
    dest: Path
    written: list[FileEntry] = field(default_factory=list)
    not_kept: list[FileEntry] = field(default_factory=list)
    links: list[FileEntry] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(e.size for e in self.written)


def gettable(record: Record) -> list[FileEntry]:
    """The files `repro get` can write of a run: its outputs (kept or not, links included)."""
    return sorted(record.results.outputs, key=lambda e: e.path)


def select(record: Record, paths: list[str]) -> list[FileEntry]:
    """The outputs ``paths`` name (a file, or a directory holding some); every output without paths.

    Raises:
        NotFoundError: a path names no output of the run.
    """
    outputs = gettable(record)
    if not paths:
        return outputs
    chosen: dict[str, FileEntry] = {}
    for raw in paths:
        rel = raw.strip("/").removeprefix("./")
        found = [e for e in outputs if e.path == rel or e.path.startswith(rel + "/")]
        if not found:
            raise NotFoundError(
                f"run {record.id} has no output {raw!r}",
                hint=f"`repro show {record.id}` lists its outputs",
            )
        chosen.update((e.path, e) for e in found)
    return sorted(chosen.values(), key=lambda e: e.path)


def get_files(loaded: LoadedRun, paths: list[str], dest: Path, force: bool = False) -> GetResult:
    """Write the outputs ``paths`` name (all without paths) of ``loaded`` under ``dest``.

    Raises:
        NotFoundError: a path names no output.
        UsageError: a file already at a destination path, without ``force``; a named output not kept.
        CapsuleInvalid: an unsafe path in the record; a blob whose bytes do not match its name.
        OSError: a file could not be written.
    """
    record = loaded.record
    result = GetResult(record.id, dest)
    wanted: list[FileEntry] = []
    for entry in select(record, paths):
        if not rules.is_safe_relpath(entry.path):
            raise CapsuleInvalid(f"run {record.id} names an unsafe output path: {entry.path!r}")
        if entry.link is not None:
            result.links.append(entry)
        elif not entry.stored or not loaded.unchecked_path(entry.hash).is_file():
            result.not_kept.append(entry)
        else:
            wanted.append(entry)
    taken = [e.path for e in wanted if os.path.lexists(dest / e.path)]
    if taken and not force:
        shown = ", ".join(taken[:5]) + (f" (+{len(taken) - 5} more)" if len(taken) > 5 else "")
        raise UsageError(f"{dest} already holds {shown}", hint="pass --force to replace them")
    if paths and result.not_kept and not wanted:
        named = ", ".join(e.path for e in result.not_kept[:5])
        raise UsageError(
            f"run {record.id} did not keep {named}: hashed, not stored",
            hint="outputs over store.max_output_bytes are hashed, not kept; raise it and run again",
        )
    dest.mkdir(parents=True, exist_ok=True)
    for entry in wanted:
        _write(loaded.blob_path(entry.hash), dest, entry)
        result.written.append(entry)
    return result


def _write(source: Path, dest: Path, entry: FileEntry) -> None:
    """Copy a blob to ``dest / entry.path`` through a new file renamed into place, checked against the
    hash on the way; no directory on the way may be a link or a file.

    Raises:
        CapsuleInvalid: a link or file on the way; the bytes do not match the hash.
    """
    parent = parent_dir(dest, entry.path, str(dest))
    target = parent / entry.path.split("/")[-1]
    if os.path.lexists(target) and not stat.S_ISREG(os.lstat(target).st_mode):
        raise UsageError(f"{target} is not a plain file; repro get replaces only files")
    tmp = parent / f".{target.name}.repro-get.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    copy_checked(source, tmp, entry.hash, f"the kept copy of {entry.path}")
    os.replace(tmp, target)  # replaces a file, or the link itself: never writes through one
