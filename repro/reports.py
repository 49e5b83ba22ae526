"""What the processes of a run reported about themselves (``proc.<pid>.jsonl``, see repro.runtime.report).

Pure data: the runner folds it into the record. A run whose main process never reported
in ran without the runtime: nothing was seeded, no determinism knob was set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.runtime.report import REPORT_PREFIX, REPORT_SUFFIX


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


def report_files(runtime_dir: Path) -> list[Path]:
    return sorted(runtime_dir.glob(f"{REPORT_PREFIX}*{REPORT_SUFFIX}"))


def _events(path: Path) -> list[dict[str, Any]]:
    found = []
    try:
        lines = path.read_text("utf-8", "replace").splitlines()
    except OSError:
        return found
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a process killed mid-line
        if isinstance(event, dict):
            found.append(event)
    return found


def written_by(runtime_dir: Path) -> set[str]:
    """The project-relative files the processes reporting to ``runtime_dir`` wrote."""
    found: set[str] = set()
    for path in report_files(runtime_dir):
        for event in _events(path):
            p = event.get("p")
            if event.get("e") == "w" and isinstance(p, str) and not p.startswith("/"):
                found.add(p)
    return found


def read_reports(runtime_dir: Path) -> Reports:
    """Every process's report in ``runtime_dir``, merged."""
    reports = Reports()
    seeds: dict[tuple[str, str, str], dict[str, Any]] = {}
    for path in report_files(runtime_dir):
        for event in _events(path):
            kind, p = event.get("e"), event.get("p")
            if kind == "boot":
                reports.processes += 1
                reports.main_booted = reports.main_booted or bool(event.get("main"))
            elif kind == "w" and isinstance(p, str):
                (reports.written_outside if p.startswith("/") else reports.written).add(p)
            elif kind == "r" and isinstance(p, str):
                reports.read.add(p)
            elif kind == "seed":
                entry = {"api": event.get("api"), "value": event.get("value"), "where": event.get("where")}
                seeds.setdefault((str(entry["api"]), repr(entry["value"]), str(entry["where"])), entry)
            elif kind == "nd":
                reports.nondeterministic.append(event)
    reports.script_seeds = sorted(seeds.values(), key=lambda s: (str(s["where"]), str(s["api"])))
    return reports
