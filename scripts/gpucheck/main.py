"""`scripts/gpu-check`: the command line, the time budget, the report."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from .checks import CHECKS, TOTAL_BUDGET_S, Check
from .harness import Deadline, Lab, OverBudget, gpu_count, install_wheels, machine_facts
from .report import Result, write

NOTHING = "gpu-check: no NVIDIA GPU on this machine (nvidia-smi lists none): nothing to check"
DESCRIPTION = (
    "Run every GPU claim of the README (each tagged [gpu-check: NAME] there) on this machine's NVIDIA GPUs "
    f"in at most {TOTAL_BUDGET_S // 60} minutes, with this machine's Python and torch, repro's dependencies "
    "from the wheels in .whl/ (make gpu-wheels) and the local backend. Writes REPORT.md and report.json to "
    "$GPU_CHECK_OUT (default gpu-check/). Without a GPU: one line, exit 0. Exit 1 when a check fails."
)


def dry_run_lines() -> list[str]:
    """One line per check: name, time budget, what it verifies."""
    return [
        f"{c.name:<18} {c.budget_s:>3} s  {c.title}" + ("  (2+ GPUs)" if c.min_gpus > 1 else "")
        for c in CHECKS
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/gpu-check", description=DESCRIPTION)
    parser.add_argument("--dry-run", action="store_true", help="list the checks, one line each, and exit")
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        choices=[c.name for c in CHECKS],
        help="run only this check (repeatable)",
    )
    args = parser.parse_args(argv)
    if args.dry_run:
        sys.stdout.write("\n".join(dry_run_lines()) + "\n")
        return 0
    gpus = gpu_count()
    if gpus == 0:
        sys.stdout.write(NOTHING + "\n")
        return 0
    out = Path(os.environ.get("GPU_CHECK_OUT") or "gpu-check").resolve()
    selected = [c for c in CHECKS if not args.only or c.name in args.only]
    return run_all(Lab(out), selected, gpus)


def run_all(lab: Lab, selected: list[Check], gpus: int) -> int:
    """Set up, run each check inside its budget and the total one, write the report; 1 if any failed."""
    total = Deadline(TOTAL_BUDGET_S)
    try:
        _say(install_wheels(lab.out / "site"))
        lab.site = lab.out / "site"
        sys.path.insert(0, str(lab.site))
        if not shutil.which("git"):
            raise RuntimeError("git is not on PATH: repro records each run's code with git")
        lab.facts = machine_facts(gpus)
        if not lab.facts.get("cuda_available"):
            raise RuntimeError(
                f"{gpus} GPU(s) listed but this Python's torch ({lab.facts.get('torch')}) sees no CUDA"
            )
    except (RuntimeError, OSError) as e:
        results = [Result(c.name, c.title, "fail", f"not run: {e}") for c in selected]
        write(lab.out, lab.facts, results, TOTAL_BUDGET_S - total.left())
        _say(f"gpu-check: {e}")
        return 1
    f = lab.facts
    _say(
        f"{f.get('device')} × {gpus}, driver {f.get('driver')}, CUDA {f.get('cuda')}, "
        f"torch {f.get('torch')}; {len(selected)} checks, report in {lab.out}"
    )
    results = []
    for i, check in enumerate(selected, 1):
        reserved = sum(c.budget_s for c in selected[i:] if gpus >= c.min_gpus)
        result = run_one(lab, check, gpus, budget_for(check.budget_s, total.left(), reserved))
        results.append(result)
        _say(f"[{i}/{len(selected)}] {check.name}: {result.status} ({result.seconds:.0f} s) {result.figure}")
        write(lab.out, lab.facts, results, TOTAL_BUDGET_S - total.left())  # a report even if stopped halfway
    _say(f"gpu-check: report in {lab.out / 'REPORT.md'}")
    return 1 if any(r.status == "fail" for r in results) else 0


def budget_for(own: float, left: float, reserved: float) -> float:
    """A check's seconds: its own budget plus what the checks before it left unspent, never eating into
    the budgets of the checks after it (``reserved``) nor past the total (``left``)."""
    return max(0.0, min(left, max(own, left - reserved)))


def run_one(lab: Lab, check: Check, gpus: int, budget: float) -> Result:
    """One check inside ``budget`` seconds; whatever it raises is its failure."""
    if gpus < check.min_gpus:
        return Result(
            check.name, check.title, "skip", f"needs {check.min_gpus} GPUs, this machine has {gpus}"
        )
    if budget < 5:
        return Result(
            check.name, check.title, "skip", f"not run: the {TOTAL_BUDGET_S} s of the whole check are spent"
        )
    lab.commands = []
    started = time.monotonic()
    try:
        status, figure, details = check.fn(lab, Deadline(budget), gpus)
    except OverBudget as e:
        status, figure, details = "fail", f"over its {budget:.0f} s budget: {e}", {}
    except Exception as e:  # a failing check never stops the others
        status, figure, details = "fail", f"{type(e).__name__}: {e}", {}
    seconds = time.monotonic() - started
    return Result(check.name, check.title, status, figure, list(lab.commands), round(seconds, 1), details)


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
