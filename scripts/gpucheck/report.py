"""The gpu-check report: one row per claim (command, figure, status), written as REPORT.md and
report.json; and the bootstrap interval the price check quotes."""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Status = Literal["pass", "fail", "skip", "finding"]
FORMAT = "repro.gpu-check/v1"
Outcome = tuple[Status, str, dict[str, Any]]  # what a check returns: status, figure, details


@dataclass
class Result:
    """One claim's outcome: ``finding`` is a measured fact with no pass/fail (a price, a match or not)."""

    name: str
    title: str
    status: Status
    figure: str
    commands: list[str] = field(default_factory=list)
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)


def bootstrap_ci(
    values: Sequence[float],
    stat: Callable[[Sequence[float]], float] = statistics.median,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """The percentile bootstrap interval of ``stat`` over ``values`` (seeded: the same numbers give the
    same interval).

    Raises:
        ValueError: no values, or a level outside (0, 1).
    """
    if not values:
        raise ValueError("bootstrap_ci needs at least one value")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), not {level}")
    rng = random.Random(seed)
    n = len(values)
    stats = sorted(stat([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    lo = int((1 - level) / 2 * (resamples - 1))
    hi = int(round((1 + level) / 2 * (resamples - 1)))
    return stats[lo], stats[hi]


def summary(results: Sequence[Result]) -> dict[str, int]:
    """How many checks ended in each status."""
    counts = {"pass": 0, "fail": 0, "skip": 0, "finding": 0}
    for r in results:
        counts[r.status] += 1
    return counts


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(machine: dict[str, Any], results: Sequence[Result], seconds: float) -> str:
    """REPORT.md: the machine, then one table row per claim."""
    counts = summary(results)
    lines = [
        "# gpu-check",
        "",
        f"- device: {machine.get('device', '?')} × {machine.get('gpu_count', '?')}",
        f"- driver: {machine.get('driver', '?')}, CUDA (torch): {machine.get('cuda', '?')}, "
        f"torch: {machine.get('torch', '?')}, Python: {machine.get('python', '?')}",
        f"- repro: {machine.get('repro', '?')}",
        f"- {len(results)} checks in {seconds:.0f} s: " + ", ".join(f"{v} {k}" for k, v in counts.items()),
        "",
        "| check | status | figure | command | time |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in results:
        cmd = "<br>".join(f"`{_cell(c)}`" for c in r.commands) or "-"
        lines.append(f"| {r.name} | {r.status} | {_cell(r.figure)} | {cmd} | {r.seconds:.0f} s |")
    return "\n".join(lines) + "\n"


def write(out: Path, machine: dict[str, Any], results: Sequence[Result], seconds: float) -> None:
    """Write ``out``/REPORT.md and ``out``/report.json (the folder made if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "format": FORMAT,
        "machine": machine,
        "seconds": round(seconds, 1),
        "summary": summary(results),
        "checks": [asdict(r) for r in results],
    }
    (out / "report.json").write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    (out / "REPORT.md").write_text(render_markdown(machine, results, seconds))
