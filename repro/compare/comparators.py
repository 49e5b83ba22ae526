"""The output comparators: which files each one claims, and how it compares two of them.

An output present in both runs with different bytes is offered to each comparator of `COMPARATORS`
in order, as pytest tries its first-result hooks: one that claims the file's name may still decline
once it has looked (None: a ``.png`` holding JPEG bytes is no stamped format); the first result wins.
The byte comparison comes last and claims every file. `register` adds a comparator ahead of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal, Protocol

from repro.compare import stamps, tables
from repro.compare.tensors import (
    NeedsUnpickling,
    TensorReport,
    UnreadableTensorFile,
    compare_tensor_files,
    is_tensor_file,
)
from repro.compare.tolerance import Tolerance
from repro.compare.values import ValueReport
from repro.store.record import FileEntry

# How an output was compared: by hash (a file), by link target, by content (tensors, a table, the
# TensorBoard events of a directory), or with its clock fields left out (a format of `stamps`).
OutputKind = Literal["file", "link", "tensors", "table", "tensorboard"] | stamps.StampFormat


@dataclass(frozen=True)
class Pair:
    """One output both runs wrote, with different bytes."""

    path: str
    a: FileEntry
    b: FileEntry
    open: Callable[[], tuple[Path, Path] | str]  # both files, or why one side's bytes are not here
    tol: Tolerance
    roots: tuple[str | None, str | None] = (None, None)  # each run's project root, as it saw it
    images: tuple[str, ...] = ()  # the images the runs ran in (where a pickle may be unpickled)
    tensors: bool = True  # False: tensor files by hash only (no torch or numpy import)

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.path).suffix


@dataclass
class Result:
    """What a comparator found: ``same`` when the content is, for all the bytes differ."""

    status: Literal["same", "changed"]
    kind: OutputKind
    note: str | None = None
    tensors: TensorReport | None = None
    values: ValueReport | None = None


class Comparator(Protocol):
    """A comparator: the files it claims (by name), and their comparison (None: not mine after all)."""

    name: str

    def claims(self, path: str) -> bool: ...

    def compare(self, pair: Pair) -> Result | None: ...


class TensorComparator:
    """Tensor files (``.pt``, ``.safetensors``, ``.npz`` …), tensor by tensor (`compare.tensors`)."""

    name = "tensors"

    def claims(self, path: str) -> bool:
        return is_tensor_file(path)

    def compare(self, pair: Pair) -> Result:
        found = Result("changed", "tensors")
        if not pair.tensors:
            return found
        opened = pair.open()
        if isinstance(opened, str):
            found.note = opened
            return found
        try:
            found.tensors = compare_tensor_files(
                *opened, pair.tol, suffix=pair.suffix, roots=pair.roots, images=list(pair.images)
            )
        except NeedsUnpickling as e:  # readable, though not here: its reason says how it was compared
            found.note = e.reason
            return found
        except UnreadableTensorFile as e:
            found.note = f"unreadable: {e.reason}"
            return found
        if found.tensors.rooted and found.tensors.equal:
            # Equal to the bit once the two runs' own locations are read as one (`compare.rootpath`):
            # the same object saved from another directory.
            found.status = "same"
            found.note = (
                f"equal tensors and values; {found.tensors.rooted} path(s) under the project root "
                "compared relative to it"
            )
        return found


class TableComparator:
    """Metric files (``.json``, ``.jsonl``, ``.csv``), value by value, timing fields left out."""

    name = "table"

    def claims(self, path: str) -> bool:
        return tables.is_table_file(path)

    def compare(self, pair: Pair) -> Result:
        found = Result("changed", "table")
        if max(pair.a.size, pair.b.size) > tables.MAX_TABLE_BYTES:
            found.note = "too large to compare by content"
            return found
        opened = pair.open()
        if isinstance(opened, str):
            found.note = opened
            return found
        try:
            found.values = tables.compare_tables(*opened, pair.tol, pair.suffix.lower())
        except (tables.UnreadableTable, OSError) as e:
            found.note = f"unreadable: {e}"
            return found
        if found.values.equal:
            found.status = "same"
            ignored = found.values.ignored
            shown = ", ".join(ignored[:4]) + (" …" if len(ignored) > 4 else "")
            found.note = (
                f"equal values; timing fields left out: {shown}" if shown else "equal values, other bytes"
            )
        return found


class StampComparator:
    """Files whose bytes carry a clock (PDF, PNG, gzip …), their time fields left out (`compare.stamps`)."""

    name = "stamps"

    def claims(self, path: str) -> bool:
        return stamps.is_candidate(path)

    def compare(self, pair: Pair) -> Result | None:
        opened = pair.open()
        if isinstance(opened, str):
            return None
        try:
            match = stamps.compare(*opened, pair.suffix)
        except (stamps.UnreadableArtifact, OSError) as e:
            return Result("changed", "file", f"unreadable: {e}")
        if match is None:  # its first bytes are no format of stamps
            return None
        return Result("same" if match.equal else "changed", match.format, match.note)


class ByteComparator:
    """Any file, last: different bytes are a change."""

    name = "bytes"

    def claims(self, path: str) -> bool:
        return True

    def compare(self, pair: Pair) -> Result:
        return Result("changed", "file", "not a format compared by content")


COMPARATORS: list[Comparator] = [TensorComparator(), TableComparator(), StampComparator(), ByteComparator()]


def register(comparator: Comparator) -> None:
    """Try ``comparator`` after those registered before it and ahead of the byte comparison.

    Raises:
        ValueError: a comparator of that name is registered already.
    """
    if any(c.name == comparator.name for c in COMPARATORS):
        raise ValueError(f"an output comparator named {comparator.name!r} is registered already")
    COMPARATORS.insert(len(COMPARATORS) - 1, comparator)


def compare_pair(pair: Pair) -> Result:
    """The first result of the comparators that claim ``pair``'s name, in order."""
    for comparator in COMPARATORS:
        if comparator.claims(pair.path):
            found = comparator.compare(pair)
            if found is not None:
                return found
    raise AssertionError("the byte comparison claims every file")  # pragma: no cover
