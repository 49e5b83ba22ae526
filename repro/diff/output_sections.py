"""The sections for what a run produced: its metrics and its output files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from repro.compare.outputs import OutputDiff, Outputs, compare_outputs
from repro.compare.tensors import TensorReport
from repro.compare.tolerance import STRICT
from repro.diff.changes import change_phrase, dict_changes, fmt_value, scalar
from repro.diff.files import MAX_GROUPS, files_summary, group_by_dir
from repro.diff.metrics import divergences, metric_rows, series
from repro.diff.model import Change, Section, TensorChange, TensorFileChange
from repro.diff.reader import OpenBlob, SafeReader
from repro.facts import hydra
from repro.store.record import FileEntry, Record
from repro.units import plural

# --------------------------------------------------------------------------- metrics


def diff_metrics(a: Record, b: Record, read: SafeReader) -> Section:
    """The metrics section: final metrics, series present on one side, and the first divergence."""
    fa, fb = a.results.final_metrics, b.results.final_metrics
    changes = dict_changes(fa, fb, "final")
    rows_a = metric_rows(a, read)
    rows_b = metric_rows(b, read)
    parted = divergences(rows_a, rows_b)
    divergence = parted[0] if parted else None
    names_a, names_b = set(series(rows_a)), set(series(rows_b))
    for d in parted:  # each metric's own first divergent step
        where = f"first differs at step {d.step:g}"
        changes.append(Change(d.metric, "changed", "diverged", d.a, d.b, detail=where))
    for name in sorted(names_b - names_a - set(fb)):
        changes.append(Change(key=name, kind="added", scope="series"))
    for name in sorted(names_a - names_b - set(fa)):
        changes.append(Change(key=name, kind="removed", scope="series"))
    parts = [_metric_phrase(c) for c in changes[:3] if c.scope == "final"]
    if divergence is not None:
        parts.append(f"series diverge at step {divergence.step} ({divergence.metric})")
    return Section(name="", title="", changes=changes, summary=", ".join(parts), divergence=divergence)


def _metric_phrase(c: Change) -> str:
    if c.kind == "changed" and c.delta is not None:
        sign = "+" if c.delta >= 0 else "−"
        return f"{c.key} {fmt_value(c.old)} → {fmt_value(c.new)} ({sign}{abs(c.delta):.4g})"
    return change_phrase(c)


# --------------------------------------------------------------------------- outputs


def diff_outputs(a: Record, b: Record, open_blob: OpenBlob | None = None) -> Section:
    """The outputs section: run status, exit code and output files.

    Files compare as a replay compares them (`repro.compare.outputs`), exactly: TensorBoard event
    files by directory, tag and step, metric files by value, timings left out, and tensor files
    tensor by tensor, when ``open_blob`` finds their stored bytes; else by hash.
    """
    ra, rb = a.results, b.results
    changes = scalar("status", ra.status, rb.status, "status")
    changes += scalar("exit_code", ra.exit_code, rb.exit_code, "status")

    def opener(entry: FileEntry) -> Path | None:
        return open_blob(entry.hash) if open_blob is not None and entry.stored else None

    entries_b, notes = _paired_run_dirs(a, b)
    images = [r.deps.image.id if r.deps.image else None for r in (a, b)]
    side_a = Outputs(a.id, list(ra.outputs), opener, image=images[0])
    side_b = Outputs(b.id, entries_b, opener, image=images[1])
    compared = compare_outputs(side_a, side_b, STRICT, tensors=open_blob is not None)
    shared = {w.path: w.writers() for w in [*ra.shared_writes, *rb.shared_writes]}
    files = [_output_change(d, shared.get(d.path)) for d in compared if d.status != "same"]
    changes += files
    notes += [f"{d.path}: {d.note}" for d in compared if d.status == "same" and d.note]
    parts = []
    if any(c.key == "status" for c in changes):
        parts.append(f"status {ra.status} → {rb.status}")
    if files:
        parts.append(files_summary(files))
    return Section(
        name="",
        title="",
        changes=changes,
        summary=", ".join(parts),
        groups=group_by_dir(files) if len(files) > MAX_GROUPS else [],
        notes=notes,
    )


def _paired_run_dirs(a: Record, b: Record) -> tuple[list[FileEntry], list[str]]:
    """B's outputs, those under the Hydra run directory repro pinned for B read as under A's.

    Each run of a Hydra app writes into its own pinned directory; the same file in both is one
    output compared, not one removed and one added.
    """
    entries = list(b.results.outputs)
    da, db = hydra.pinned_dir(a.command.injected), hydra.pinned_dir(b.command.injected)
    if not da or not db or da == db:
        return entries, []
    prefix = db.rstrip("/") + "/"
    paired = [
        dataclasses.replace(e, path=da.rstrip("/") + "/" + e.path[len(prefix) :])
        if e.path.startswith(prefix)
        else e
        for e in entries
    ]
    return paired, [f"outputs in the Hydra run directories repro pinned compared in place: {db}/… as {da}/…"]


def _output_change(d: OutputDiff, writers: str | None = None) -> Change:
    """A changed output as a diff row; one that several processes wrote at once (``writers``) says so
    first: its bytes depend on which wrote last, whatever they hold."""
    kind = {"missing": "removed", "added": "added"}.get(d.status, "changed")
    old, new = d.original_size, d.replay_size
    delta = (new or 0) - (old or 0)
    detail = None
    if d.values is not None and d.values.first is not None:
        f = d.values.first
        at = f" at step {f.step}" if f.step is not None else ""
        detail = f"{f.name}{at}: {fmt_value(f.original)} → {fmt_value(f.replay)}"
    tensors = _tensor_changes(d.tensors) if d.tensors is not None else None
    if tensors is not None:
        detail = _tensors_detail(tensors)
    elif d.kind == "tensors" and d.note:
        detail = d.note  # unreadable on one side, say
    if writers is not None and kind == "changed":
        detail = f"written by {writers} at once" + (f"; {detail}" if detail else "")
    change = Change(key=d.path, kind=kind, scope="file", old=old, new=new, delta=delta, detail=detail)
    change.tensors = tensors
    return change


def _tensor_changes(t: TensorReport) -> TensorFileChange:
    """The tensors of a file that differ: values largest difference first, then shape, dtype, presence."""
    values = sorted(t.differing, key=lambda d: (-_nan_big(d.max_abs), d.name))
    found = [TensorChange(d.name, "value", d.max_abs, d.max_rel) for d in values]
    found += [TensorChange(m.name, m.reason, a=m.original, b=m.replay) for m in t.mismatched]
    found += [TensorChange(name, "only_a") for name in t.only_original]
    found += [TensorChange(name, "only_b") for name in t.only_replay]
    return TensorFileChange(found, t.identical)


def _nan_big(x: float) -> float:
    return float("inf") if x != x else x


def _tensors_detail(t: TensorFileChange) -> str:
    """``1 tensor differs: 2.bias (max abs 0.031); 3 unchanged`` (the largest difference first)."""
    n = len(t.differing)
    if not n:
        return f"other bytes, all {plural(t.unchanged, 'tensor')} equal"
    first = t.differing[0]
    how = f"max abs {first.max_abs:.3g}" if first.max_abs is not None else first.kind.replace("_", " ")
    verb = "differs" if n == 1 else "differ, first"
    return f"{plural(n, 'tensor')} {verb}: {first.name} ({how}); {t.unchanged} unchanged"
