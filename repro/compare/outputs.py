"""Compare two runs' output files: by hash, and by content for the formats repro knows.

- any file: by hash; a file on one side only is ``missing`` (the replay lacks it) or ``added``;
- a symbolic link the run made (recorded as a link, `repro.collect.produced`): by its target string;
- tensor files (``.pt``/``.pth``/``.safetensors``/``.npy``/``.npz`` …) whose bytes differ:
  tensor by tensor (`repro.compare.tensors`), reported as ``changed`` with a tensor report; ``same``
  when the only difference is where each run ran (a path under its project root, such as a
  Lightning checkpoint's ``best_model_path``: `repro.compare.rootpath`) and every tensor is equal to the bit;
- metric files (``.json``/``.jsonl``/``.csv``) whose bytes differ: value by value with the
  mode's tolerance, timing fields left out (`repro.compare.tables`); equal values → ``same``;
- TensorBoard event files: grouped by directory, never compared by name, read per tag and
  step with wall times left out (`repro.compare.tensorboard`); one entry per directory,
  ``same`` when every value is equal. Without the ``tensorboard`` package the files of
  paired directories are compared by bytes, with a note;
- files whose bytes carry a clock (PDF, PostScript, PNG, SVG, gzip, zip, tar; named so): by content with
  their time fields left out (`repro.compare.stamps`); equal content → ``same``, with a note
  naming the format and the fields left out ("same content (PDF, creation date ignored)").

A file with different bytes goes to the comparators of `repro.compare.comparators`, tried in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from repro.compare import stamps, tensorboard
from repro.compare.comparators import OutputKind, Pair, compare_pair
from repro.compare.tensors import TensorReport
from repro.compare.tolerance import Tolerance
from repro.compare.values import Series, ValueReport, compare_series
from repro.store.record import FileEntry

OutputStatus = Literal[
    "same", "changed", "missing", "added"
]  # missing: the replay lacks it; added: replay only
OpenOutput = Callable[[FileEntry], "Path | None"]


@dataclass
class OutputDiff:
    """One output (a file, or a directory of TensorBoard event files) compared across two runs."""

    path: str
    status: OutputStatus
    original_hash: str | None = None
    replay_hash: str | None = None
    original_size: int | None = None
    replay_size: int | None = None
    tensors: TensorReport | None = None
    note: str | None = None  # why no content report, or what "same" rests on when bytes differ
    kind: OutputKind = "file"
    values: ValueReport | None = None  # table and tensorboard outputs compared by content
    replay_path: str | None = None  # where the replay's counterpart lies, when paired by content

    @property
    def stamped(self) -> bool:
        """Compared by content with its clock fields left out (a PDF, a gzip …): ``kind`` names the format."""
        return self.kind in stamps.FORMATS

    @property
    def within_tolerance(self) -> bool:
        """A same output, or a changed one whose content is all within tolerance."""
        if self.status == "same":
            return True
        if self.status != "changed":
            return False
        if self.tensors is not None:
            return self.tensors.within_tolerance
        return self.values is not None and self.values.within_tolerance


@dataclass
class Outputs:
    """One run's outputs and how to open their stored bytes."""

    label: str
    entries: list[FileEntry]
    open: OpenOutput
    root: str | None = None  # the project root as the run saw it: paths under it compare relative to it
    image: str | None = None  # the image the run ran in: where a pickle it wrote may be unpickled


def compare_outputs(
    original: Outputs, replay: Outputs, tol: Tolerance, *, tensors: bool = True
) -> list[OutputDiff]:
    """Every output of either run compared, sorted by path (TensorBoard directories as one each).

    ``tensors=False`` leaves tensor files compared by hash only (no torch or numpy import).
    """
    events_a = [e for e in original.entries if tensorboard.is_event_file(e.path)]
    events_b = [e for e in replay.entries if tensorboard.is_event_file(e.path)]
    a = {e.path: e for e in original.entries if not tensorboard.is_event_file(e.path)}
    b = {e.path: e for e in replay.entries if not tensorboard.is_event_file(e.path)}
    diffs = [
        _compare_file(p, a.get(p), b.get(p), original, replay, tol, tensors) for p in a.keys() | b.keys()
    ]
    diffs += _compare_events(events_a, events_b, original, replay, tol)
    return sorted(diffs, key=lambda d: d.path)


def _compare_file(
    path: str,
    ea: FileEntry | None,
    eb: FileEntry | None,
    original: Outputs,
    replay: Outputs,
    tol: Tolerance,
    tensors: bool,
) -> OutputDiff:
    d = OutputDiff(
        path=path,
        status="same",
        original_hash=ea.hash if ea else None,
        replay_hash=eb.hash if eb else None,
        original_size=ea.size if ea else None,
        replay_size=eb.size if eb else None,
    )
    if ea is None:
        d.status = "added"
    elif eb is None:
        d.status = "missing"
    elif ea.link is not None or eb.link is not None:
        d.kind = "link"  # compared by target string; never opened
        if ea.link != eb.link:
            d.status = "changed"
            d.note = f"{_what(ea)} vs {_what(eb)}"
    elif ea.hash != eb.hash:
        pair = Pair(
            path,
            ea,
            eb,
            lambda: _opened(original, ea, replay, eb),
            tol,
            (original.root, replay.root),
            tuple(i for i in (original.image, replay.image) if i),
            tensors,
        )
        found = compare_pair(pair)
        d.status, d.kind, d.note, d.tensors, d.values = (
            found.status, found.kind, found.note, found.tensors, found.values
        )  # fmt: skip
    return d


def _what(entry: FileEntry) -> str:
    return "a file" if entry.link is None else f"a link to {entry.link}"


def _opened(original: Outputs, ea: FileEntry, replay: Outputs, eb: FileEntry) -> tuple[Path, Path] | str:
    pa, pb = original.open(ea), replay.open(eb)
    if pa is None or pb is None:
        who = original.label if pa is None else replay.label
        return f"bytes not kept for {who or 'one side'}"
    return pa, pb


# --------------------------------------------------------------------------- TensorBoard


def _by_dir(entries: list[FileEntry]) -> dict[str, list[FileEntry]]:
    groups: dict[str, list[FileEntry]] = {}
    for e in sorted(entries, key=lambda e: e.path):
        groups.setdefault(tensorboard.event_dir(e.path), []).append(e)
    return groups


def _compare_events(
    events_a: list[FileEntry], events_b: list[FileEntry], original: Outputs, replay: Outputs, tol: Tolerance
) -> list[OutputDiff]:
    if not events_a and not events_b:
        return []
    ga, gb = _by_dir(events_a), _by_dir(events_b)
    readable = tensorboard.available()
    series_a = {d: _read(files, original) if readable else None for d, files in ga.items()}
    series_b = {d: _read(files, replay) if readable else None for d, files in gb.items()}
    tags_a = {d: frozenset(s) if isinstance(s, dict) else frozenset() for d, s in series_a.items()}
    tags_b = {d: frozenset(s) if isinstance(s, dict) else frozenset() for d, s in series_b.items()}
    pairs, only_a, only_b = tensorboard.pair_dirs(tags_a, tags_b)
    diffs = []
    for da, db in pairs:
        d = _events_diff(da, ga[da], gb[db], "changed")
        d.replay_path = None if db == da else db
        sa, sb = series_a[da], series_b[db]
        if isinstance(sa, dict) and isinstance(sb, dict):
            d.values = compare_series(sa, sb, tol, "tensorboard")
            if d.values.equal:
                d.status = "same"
                d.note = (
                    f"{d.values.compared} values equal per tag and step; wall times and file names left out"
                )
        else:
            why = sa if isinstance(sa, str) else sb if isinstance(sb, str) else None
            _events_by_bytes(d, ga[da], gb[db], why)
        if d.replay_path:
            d.note = f"paired with {db}/ by tags; " + (d.note or "")
        diffs.append(d)
    diffs += [_events_diff(da, ga[da], [], "missing") for da in only_a]
    diffs += [_events_diff(db, [], gb[db], "added") for db in only_b]
    return diffs


def _events_diff(
    directory: str, fa: list[FileEntry], fb: list[FileEntry], status: OutputStatus
) -> OutputDiff:
    return OutputDiff(
        path=("" if directory == "." else directory + "/") + "events.out.tfevents.*",
        status=status,
        kind="tensorboard",
        original_size=sum(e.size for e in fa) if fa else None,
        replay_size=sum(e.size for e in fb) if fb else None,
    )


def _events_by_bytes(d: OutputDiff, fa: list[FileEntry], fb: list[FileEntry], why: str | None) -> None:
    same = [e.hash for e in fa] == [e.hash for e in fb]
    d.status = "same" if same else "changed"
    reason = why or f"the tensorboard package is not installed ({tensorboard.INSTALL_HINT})"
    d.note = f"compared by bytes: {reason}"


def _read(files: list[FileEntry], side: Outputs) -> Series | str:
    """A directory's tags, or why they could not be read."""
    paths = []
    for e in files:
        p = side.open(e)
        if p is None:
            return f"bytes not kept for {side.label or 'one side'}"
        paths.append(p)
    try:
        return tensorboard.read_events(paths)
    except tensorboard.UnreadableEvents as e:
        return f"unreadable: {e}"
