"""What "the results" of a run are, in one place: what a replay, a check and a diff compare.

A run's results are its outputs (by content where repro knows the format), its metric series
(logged and harvested), its stdout by meaning (timings masked) and its exit status; a replay also
compares the optimizer-step trace and the data order where both runs recorded them.
`side_of` reads them from a record; `compare_results` says whether two runs' results are the same,
with the codes and sentences of `repro.compare.verdict`. Any statement such as "results
identical" is derived from this comparison and from nothing else.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from repro.compare import dataorder, rootpath, trace
from repro.compare.reasons import Code
from repro.compare.verdict import CompareOptions, Side, Verdict, compare_runs
from repro.diff.metrics import metric_rows
from repro.diff.model import Change, ResultDifference, Section
from repro.diff.reader import OpenBlob, ReadBlob, SafeReader
from repro.store import limits
from repro.store.record import FileEntry, Record
from repro.units import plural

if TYPE_CHECKING:
    from pathlib import Path


def side_of(record: Record, read_blob: ReadBlob, open_blob: OpenBlob | None = None) -> Side:
    """A run's results as every comparison sees them."""
    reader = SafeReader(read_blob)
    cut: list[str] = []  # the streams read only up to their bound
    rows = metric_rows(record, _head(reader, open_blob, limits.MAX_METRICS_BYTES), cut)  # logged, harvested
    # Rank by rank when the ranks' own logs were kept: the combined stream's interleaving varies.
    blobs: list[str | None] = [*rank_stdout_blobs(record)] or [record.results.logs.get("stdout")]
    stdout = _log_text(reader, open_blob, blobs, cut)
    root = record.backend.details.get("project_root")
    root = str(root) if root else None
    # Where the code ran differs between a run and its replay; what it printed after that must not.
    stdout = rootpath.relative(stdout, rootpath.spellings(root))

    def open_output(entry: FileEntry) -> Path | None:
        path = open_blob(entry.hash) if open_blob is not None else None
        return path if entry.stored and path is not None and path.is_file() else None

    read_trace = _head(reader, open_blob, limits.MAX_COMPARED_TRACE_BYTES)
    steps = trace.read(read_trace(record.results.logs.get(trace.TRACE_LOG)), cut)
    return Side(
        label=record.id,
        outputs=list(record.results.outputs),
        open_output=open_output,
        metrics=rows,
        stdout=stdout,
        exit_code=record.results.exit_code,
        status=record.results.status,
        trace=steps,
        data_order=dataorder.read(
            record.results.logs, _head(reader, open_blob, limits.MAX_COMPARED_DATA_ORDER_BYTES), cut
        ),
        shared_writes=list(record.results.shared_writes),
        root=root,
        image=record.deps.image.id if record.deps.image else None,
        cut=cut,
    )


def _head(reader: SafeReader, open_blob: OpenBlob | None, bound: int) -> Callable[[str | None], bytes | None]:
    """A blob reader that reads no more than ``bound`` bytes and one (so a stream cut there is told
    from one that ends there): from the blob's file where there is one, a stream of any size costing
    no more; None for a missing or unreadable blob, as `SafeReader`'s."""

    def read(blob: str | None) -> bytes | None:
        path = open_blob(blob) if open_blob is not None and blob else None
        if path is None:
            raw = reader(blob)
            return None if raw is None else raw[: bound + 1]
        try:
            with open(path, "rb") as f:
                return f.read(bound + 1)
        except OSError:
            return None

    return read


def _log_text(
    reader: SafeReader, open_blob: OpenBlob | None, blobs: list[str | None], cut: list[str] | None = None
) -> str:
    """The text of logs ``blobs``, one after the other, read up to `limits.MAX_COMPARED_LOG_BYTES` in
    all: a capsule's log may be as large as the capsule, and comparing it costs memory and time in
    proportion. A blob with a file is read no further than the limit; where a log is cut there, the
    one line saying so is added to ``cut``."""
    bound = limits.MAX_COMPARED_LOG_BYTES
    left = bound + 1  # one byte more tells a log that ends at the bound from one cut there
    parts: list[bytes] = []
    for blob in blobs:
        if blob is None or left <= 0:
            continue
        path = open_blob(blob) if open_blob is not None else None
        try:
            if path is not None:
                with open(path, "rb") as f:
                    data = f.read(left)
            else:
                data = (reader(blob) or b"")[:left]
        except OSError:
            continue  # a missing or unreadable log counts as an empty one, as SafeReader's do
        left -= len(data)
        parts.append(data)
    text, was_cut = limits.stream_head(b"".join(parts), bound)
    if was_cut and cut is not None:
        cut.append(limits.cut_note("stdout", bound))
    return text


def rank_stdout_blobs(record: Record) -> list[str]:
    """The blobs of each rank's own stdout, in rank order (empty for a single-process run)."""
    logs = record.results.logs
    ranks = sorted(int(k[4:-7]) for k in logs if re.fullmatch(r"rank\d+\.stdout", k))
    return [logs[f"rank{r}.stdout"] for r in ranks]


def compare_results(a: Side, b: Side, options: CompareOptions | None = None) -> Verdict:
    """Whether two runs' results are the same, exactly (strict): ``identical`` or why not.

    Two runs that failed alike (same status and exit code) are compared on the rest of their
    results; a run that failed where the other did not has other results.
    """
    if a.failed and b.failed and (a.status, a.exit_code) == (b.status, b.exit_code):
        a = dataclasses.replace(a, status="succeeded", exit_code=0)
        b = dataclasses.replace(b, status="succeeded", exit_code=0)
    return compare_runs(a, b, "strict", options=options)


def stdout_section(verdict: Verdict) -> Section:
    """The stdout section: the first line whose meaning differs (timings masked), and how many do."""
    s = verdict.stdout
    if s is None:
        off = "stdout left out of the comparison (compare.stdout: false)"
        return Section(name="", title="", notes=[] if verdict.stdout_compared else [off])
    value = f"{s.field + ' ' if s.field else ''}{s.original_value} → {s.replay_value}"
    detail = value if s.original_value is not None else None
    change = Change(f"line {s.line}", "changed", "line", s.original, s.replay, detail=detail)
    lines = f"{plural(s.differing, 'line')} of {s.original_lines} vs {s.replay_lines} differ"
    head = f"{value} at line {s.line}" if detail else f"first at line {s.line}"
    return Section(name="", title="", changes=[change], summary=f"{lines}; {head}")


def without_outputs(side: Side) -> Side:
    """A side whose output files the diff's outputs section compares instead (once: a tensor file that
    needs the sandbox is not loaded twice), with Hydra's run directories paired."""
    return dataclasses.replace(side, outputs=[], shared_writes=[])


_BEFORE_OUTPUTS = (Code.RUN_FAILED, Code.ORIGINAL_FAILED, Code.DATA_ORDER_DIFFERS,
                   Code.WORKER_SEEDS_DIFFER, Code.TRACE_DIFFERS)  # fmt: skip


def differences(verdict: Verdict, outputs: Section) -> list[ResultDifference]:
    """How two runs' results differ, most decisive first, as a replay orders them: a failure, the data
    order and the trace, then each output file that differs, then metrics and stdout."""
    first = [
        ResultDifference(r.code, r.message, r.path) for r in verdict.reasons if r.code in _BEFORE_OUTPUTS
    ]
    rest = [
        ResultDifference(r.code, r.message, r.path) for r in verdict.reasons if r.code not in _BEFORE_OUTPUTS
    ]
    files = [
        ResultDifference(_OUTPUT_CODE.get(c.kind, Code.OUTPUT_DIFFERS), _output_message(c), c.key)
        for c in outputs.changes if c.scope == "file"
    ]  # fmt: skip
    return first + files + rest


_OUTPUT_CODE = {"removed": Code.MISSING_OUTPUT, "added": Code.EXTRA_OUTPUT}


def _output_message(c: Change) -> str:
    if c.kind == "removed":
        return f"output {c.key} is only in A"
    if c.kind == "added":
        return f"output {c.key} is only in B"
    return f"output {c.key} changed" + (f" ({c.detail})" if c.detail else "")
