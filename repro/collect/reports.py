"""What the processes of a run reported about themselves (``proc.<pid>.jsonl``, see repro.runtime.procreport).

Pure data: the runner folds it into the record. A run whose main process never reported
in ran without the runtime: nothing was seeded, no determinism knob was set. The reports
are the run's own files: read through `repro.collect.produced` (a report that is a link is not
read), and a path in them that leaves the project (``../x``, ``a/../../x``) is not a
project file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.collect import produced
from repro.runtime import contract
from repro.store import limits

REPORTS = contract.STREAMS["report"]  # proc.<pid>.jsonl


@dataclass(frozen=True)
class Writer:
    """One process that wrote a file: its pid, torchrun rank (-1: no rank) and the start of a requeued
    job it belongs to (0: the first)."""

    pid: int
    rank: int
    attempt: int = 0


@dataclass
class Reports:
    """The union of every process's report."""

    processes: int = 0  # processes that reported in
    main_booted: bool = False  # the first Python process of the run reported in
    written: set[str] = field(default_factory=set)  # relative to the project root
    written_outside: set[str] = field(default_factory=set)  # absolute, outside the project root
    read: set[str] = field(default_factory=set)  # relative to the project root
    script_seeds: list[dict[str, Any]] = field(default_factory=list)
    nondeterministic: list[dict[str, Any]] = field(default_factory=list)  # raw "nd" events
    errors: list[str] = field(default_factory=list)  # settings the runtime could not apply
    writers: dict[str, set[Writer]] = field(default_factory=dict)  # project file → processes that wrote it

    def shared(self, paths: set[str] | None = None) -> dict[str, list[Writer]]:
        """Files (of ``paths``, default all) more than one process of one start of the job wrote:
        which bytes they hold depends on which process wrote last. A requeued job's later start
        writing a file again replaces the earlier start's bytes, in order: not shared."""
        found: dict[str, list[Writer]] = {}
        for p, writers in sorted(self.writers.items()):
            if paths is not None and p not in paths:
                continue
            starts: dict[int, list[Writer]] = {}
            for w in writers:
                starts.setdefault(w.attempt, []).append(w)
            at_once = [w for group in starts.values() if len(group) > 1 for w in group]
            if at_once:
                found[p] = sorted(at_once, key=lambda w: (w.rank, w.pid))
        return found


def report_files(runtime_dir: Path) -> list[str]:
    """The processes' reports in ``runtime_dir`` (regular files only), relative to it."""
    return produced.files(runtime_dir, REPORTS.glob())


def written_by(runtime_dir: Path) -> set[str]:
    """The project-relative files the processes reporting to ``runtime_dir`` wrote."""
    found: set[str] = set()
    for rel in report_files(runtime_dir):
        for event in produced.json_lines(runtime_dir, rel, limits.MAX_PROC_REPORT_BYTES):
            p = event.get("p")
            if contract.row_kind(event) == "w" and isinstance(p, str):
                kept = produced.inside(p)
                if kept is not None:
                    found.add(kept)
    return found


def _writer(rel: str, events: list[dict[str, Any]]) -> Writer:
    """The process a report is from: the pid in its name, the rank it booted with."""
    digits = rel.removeprefix(REPORTS.file).removesuffix(".jsonl")
    boot = next((e for e in events if contract.row_kind(e) == "boot"), {})
    rank, attempt = boot.get("rank", -1), boot.get("attempt", 0)
    return Writer(
        int(digits) if digits.isdigit() else -1,
        rank if isinstance(rank, int) else -1,
        attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else 0,
    )


def read_reports(runtime_dir: Path) -> Reports:
    """Every process's report in ``runtime_dir``, merged."""
    reports = Reports()
    seeds: dict[tuple[str, str, str], dict[str, Any]] = {}
    for rel in report_files(runtime_dir):
        events = produced.json_lines(runtime_dir, rel, limits.MAX_PROC_REPORT_BYTES)
        writer = _writer(rel, events)
        for event in events:
            kind, p = contract.row_kind(event), event.get("p")
            if kind == "boot":
                reports.processes += 1
                reports.main_booted = reports.main_booted or bool(event.get("main"))
            elif kind == "w" and isinstance(p, str):
                kept = produced.inside(p)
                if kept is None:  # absolute, or a relative path that leaves the project
                    reports.written_outside.add(p)
                    continue
                reports.written.add(kept)
                reports.writers.setdefault(kept, set()).add(writer)
            elif kind == "r" and isinstance(p, str):
                kept = produced.inside(p)
                if kept is not None:
                    reports.read.add(kept)
            elif kind == "seed":
                entry = {"api": event.get("api"), "value": event.get("value"), "where": event.get("where")}
                seeds.setdefault((str(entry["api"]), repr(entry["value"]), str(entry["where"])), entry)
            elif kind == "nd":
                reports.nondeterministic.append(event)
            elif kind == "error":
                text = f"{event.get('where')}: {event.get('error')}"
                if text not in reports.errors:
                    reports.errors.append(text)
    reports.script_seeds = sorted(seeds.values(), key=lambda s: (str(s["where"]), str(s["api"])))
    return reports


def ledger(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The nondeterministic-op ledger from the raw alerts, and the alert that ended the run (if any).

    Each process reports running counts; its last (largest) count per (op, where) is kept,
    then processes of one rank are summed: ``{"op","count","rank","where","first_step"}``.
    """
    per_process: dict[tuple[Any, ...], dict[str, Any]] = {}
    fatal = None
    for event in events:
        key = (event.get("pid"), event.get("op"), event.get("where"), event.get("rank"))
        seen = per_process.get(key)
        if seen is None or int(event.get("count") or 0) >= int(seen.get("count") or 0):
            per_process[key] = event
        if event.get("fatal") and fatal is None:
            fatal = {"op": event.get("op"), "where": event.get("where"), "rank": event.get("rank")}
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for event in per_process.values():
        group = (event.get("op"), event.get("rank"), event.get("where"))
        entry = merged.setdefault(
            group, {"op": group[0], "count": 0, "rank": group[1], "where": group[2], "first_step": None}
        )
        entry["count"] += int(event.get("count") or 0)
        step = event.get("first_step")
        if step is not None and (entry["first_step"] is None or step < entry["first_step"]):
            entry["first_step"] = step
    ops = sorted(merged.values(), key=lambda e: (str(e["op"]), e["rank"] or 0, str(e["where"])))
    return ops, fatal
