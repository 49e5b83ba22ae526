"""torchrun's per-rank logs, and which rank or node failed first."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repro.collect import produced
from repro.runtime.contract import RANK_LOGS
from repro.store.record import Record

if TYPE_CHECKING:
    from repro.backends.base import RunSpec


def _rank_logs(runtime: Path) -> dict[int, dict[str, str]]:
    """torchrun's per-rank files: ``ranks/<run>_<x>/attempt_<n>/<rank>/std{out,err}.log`` under the
    runtime dir (relative to it), last attempt; nothing reached through a link."""
    found: dict[int, dict[str, str]] = {}
    attempts = [
        (run.mtime_ns, _number(attempt.rel), attempt.rel)
        for run in produced.entries(runtime, RANK_LOGS)
        if run.kind == "dir"
        for attempt in produced.entries(runtime, run.rel)
        if attempt.kind == "dir" and fnmatch.fnmatchcase(attempt.rel.rpartition("/")[2], "attempt_*")
    ]
    for _, _, attempt in sorted(attempts):  # later attempts (torchrun restarts) replace earlier ones
        for rank_dir in produced.entries(runtime, attempt):
            rank = rank_dir.rel.rpartition("/")[2]
            if rank_dir.kind != "dir" or not rank.isdigit():
                continue
            streams = {name: f"{rank_dir.rel}/{name}.log" for name in ("stdout", "stderr")}
            found[int(rank)] = {k: v for k, v in streams.items() if produced.is_file(runtime, v)}
    return found


def _number(name: str) -> int:
    digits = name.rpartition("_")[2]
    return int(digits) if digits.isdigit() else 0


_ROOT_CAUSE = re.compile(
    r"Root Cause \(first observed failure\):.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.S
)


def failed_rank(launcher_stderr: str, rank_stderr: dict[int, str]) -> tuple[int, int | None] | None:
    """The rank that failed first and its exit code, from torchrun's failure summary.

    Without a summary (the launcher itself was killed), the lowest rank whose stderr
    holds a Python traceback; None when no rank can be blamed.
    """
    match = _ROOT_CAUSE.search(launcher_stderr)
    if match:
        return int(match.group(1)), int(match.group(2))
    for rank in sorted(rank_stderr):
        if "Traceback (most recent call last)" in rank_stderr[rank]:
            return rank, None
    return None


def report_failed_rank(record: Record, spec: RunSpec, rank_logs: dict[int, dict[str, str]]) -> None:
    """Name the rank that failed and make its stderr the run's stderr tail."""
    launcher = produced.read_text(spec.stderr_path.parent, spec.stderr_path.name) or ""
    runtime = spec.runtime_dir
    stderr = {
        r: produced.read_text(runtime, s["stderr"]) or "" for r, s in rank_logs.items() if "stderr" in s
    }
    found = failed_rank(launcher, stderr)
    if found is None:
        return
    rank, code = found
    status = f"exit code {code}" if code is not None else "a Python exception"
    record.warn(
        "rank_failed",
        f"rank {rank} of {len(rank_logs)} failed first ({status}); "
        f"its stderr is kept in the record as rank{rank}.stderr",
    )
    tail = stderr.get(rank, "").splitlines()[-20:]
    prefix = f"[rank{rank}]:"
    record.results.stderr_tail = [line if line.startswith(prefix) else f"{prefix} {line}" for line in tail]


def report_failed_node(
    record: Record, failed: dict[str, Any], runtime: Path, rank_logs: dict[int, dict[str, str]]
) -> None:
    """A multi-node run: name the node and rank that failed first; its stderr becomes the tail."""
    rank, node, code = failed.get("rank"), failed.get("node"), failed.get("exit_code")
    record.warn(
        "rank_failed",
        f"rank {rank} on node {node} failed first (exit code {code}); the job's other tasks were stopped",
    )
    stderr = rank_logs.get(int(rank), {}).get("stderr") if isinstance(rank, int) else None
    if stderr is not None:
        tail = (produced.read_text(runtime, stderr) or "").splitlines()[-20:]
        record.results.stderr_tail = [f"[{node} rank{rank}]: {line}" for line in tail]
