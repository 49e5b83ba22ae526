"""The cost of `repro diff A B --prove` against the number of factors, on a 300-step run, with and
without windowed experiments, against the naive peer.

    python benchmarks/bench_prove.py                    # 2 and 4 factors, 300 steps
    python benchmarks/bench_prove.py --factors 2 --steps 60     # a smoke test

Run A trains an MLP for --steps optimizer steps (strict mode, local backend), saving a checkpoint
every tenth of the run and loading the last one when present (as public scripts resume). Run B
differs in N factors: the learning-rate decay and the label smoothing of the last fifth of the run
(each changes the result, from that step on) and N-2 options the script ignores. Two pairs of runs:

- whole runs: A and B recorded without a trace, so each experiment re-executes the whole run;
- windowed: A and B recorded with --trace (their checkpoints kept), so each experiment replays a
  window from the checkpoint where the two still agree: to their first divergence plus 10% of the
  steps (README: Proving why two runs differ).

The proof executes each factor alone, then the two causes together: N+1 executions either way. The
peer is the naive experiment: one whole bare execution of the script per factor (N executions at
one intra-op thread, as strict mode runs them; no tool, no comparison). The three are measured in
turn by the loop bench_ops.py uses (`_common.interleaved`). Reported: executions, wall and CPU
seconds, the ratio to the peer.

Sizes: --steps (REPRO_BENCH_PROVE_STEPS), --factors (REPRO_BENCH_PROVE_FACTORS, comma-separated),
--repeats (REPRO_BENCH_REPEATS; default 1: minutes a round).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import INFO, Row, interleaved, log, print_rows, recorded, repro_exe, scratch, timed_output

SCRIPT = '''"""An MLP on synthetic data; its learning rate decays and its labels smooth late in the run."""
import argparse
from pathlib import Path
from typing import Any

import torch
from torch import nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--decay", type=float, default=0.5)
    parser.add_argument("--smoothing", type=float, default=0.0)
    parser.add_argument("--checkpoint", default="checkpoints/last.pt")
    args, _ = parser.parse_known_args()  # options for other tools (--note-N) are ignored
    late, every = args.steps * 4 // 5, max(1, args.steps // 10)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.randn(2048, 64), torch.randint(0, 10, (2048,))
    start, ckpt = 0, Path(args.checkpoint)
    if ckpt.exists():  # resume where the last run stopped
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    for step in range(start, args.steps):
        if step == late:
            for group in opt.param_groups:
                group["lr"] *= args.decay
        i = torch.randint(0, 2048, (128,))
        smoothing = args.smoothing if step >= late else 0.0
        loss = nn.functional.cross_entropy(model(x[i]), y[i], label_smoothing=smoothing)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % every == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1}, ckpt)
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
'''
CAUSES = ["param:decay", "param:smoothing"]
# The peer runs at the one intra-op thread strict mode pins (README: Threads), as the proof's runs do.
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def _argv(steps: int, decay: float, smoothing: float, notes: int) -> list[str]:
    extra = [t for i in range(notes) for t in (f"--note-{i}", "b")]
    return ["python", "train.py", "--steps", str(steps), "--decay", str(decay), "--smoothing", str(smoothing),
            *extra]  # fmt: skip


def _pair(repro: str, proj: Path, steps: int, factors: int, traced: bool) -> tuple[str, str]:
    """Runs A and B, each started without a checkpoint left by another."""
    ids = []
    for argv in (_argv(steps, 0.5, 0.0, 0), _argv(steps, 0.1, 0.2, factors - 2)):
        shutil.rmtree(proj / "checkpoints", ignore_errors=True)
        ids.append(recorded(repro, proj, argv, ["--seed", "7", *(["--trace"] if traced else [])]))
    shutil.rmtree(proj / "checkpoints", ignore_errors=True)
    return ids[0], ids[1]


def _naive(proj: Path, steps: int, factors: int) -> Callable[[], tuple[float, float]]:
    """One whole bare run of the script per factor, each taking that factor from B."""
    runs = [_argv(steps, 0.1, 0.0, 0), _argv(steps, 0.5, 0.2, 0)]
    runs += [[*_argv(steps, 0.5, 0.0, 0), f"--note-{i}", "b"] for i in range(factors - 2)]

    def measure() -> tuple[float, float]:
        wall = cpu = 0.0
        for argv in runs:
            shutil.rmtree(proj / "checkpoints", ignore_errors=True)
            w, c, _ = timed_output([sys.executable, *argv[1:]], proj, ONE_THREAD)
            wall, cpu = wall + w, cpu + c
        shutil.rmtree(proj / "checkpoints", ignore_errors=True)
        return wall, cpu

    return measure


def _proof(
    repro: str, proj: Path, pair: tuple[str, str], seen: dict[str, dict[str, Any]]
) -> Callable[[], tuple[float, float]]:
    """`repro diff A B --prove`; the proof it printed is kept in ``seen`` (by run A) and checked."""

    def measure() -> tuple[float, float]:
        wall, cpu, out = timed_output([repro, "diff", *pair, "--prove", "--json"], proj)
        proof = json.loads(out)["proof"]
        if sorted(proof["proved"]) != CAUSES:
            raise RuntimeError(f"the proof found {proof['proved']}, not {CAUSES}")
        seen[pair[0]] = proof
        return wall, cpu

    return measure


def _case(repro: str, proj: Path, steps: int, factors: int, repeats: int) -> list[Row]:
    """Rows for B differing in ``factors``: the proof over whole runs, and windowed, each vs the peer."""
    whole, windowed = (_pair(repro, proj, steps, factors, traced) for traced in (False, True))
    seen: dict[str, dict[str, Any]] = {}
    peer, by_whole, by_window = interleaved(
        repeats,
        [_naive(proj, steps, factors), _proof(repro, proj, whole, seen), _proof(repro, proj, windowed, seen)],
    )
    rows = []
    for label, pair, sample in (("whole runs", whole, by_whole), ("windowed", windowed, by_window)):
        proof = seen[pair[0]]
        window = proof["window"] or {}
        if (label == "windowed") != bool(window.get("windowed")):
            raise RuntimeError(f"the {label} proof ran as {window}")
        how = (f"windows of {window['steps']} steps from step {window['from_step']}" if window.get("windowed")
               else "whole runs")  # fmt: skip
        note = f"{proof['executions']} executions by the proof ({how}) vs {factors} bare runs"
        case = f"diff --prove, {factors} factors, {label} ({steps} steps)"
        rows.append(Row(case, "one bare run per factor", peer, sample, INFO, "within", 0, note=note))
    return rows


def run(repeats: int = 1, steps: int | None = None, counts: list[int] | None = None) -> list[Row]:
    """Two rows per number of factors: the proof over whole runs and windowed, each against the peer."""
    steps = steps or int(os.environ.get("REPRO_BENCH_PROVE_STEPS", "300"))
    counts = counts or [int(n) for n in os.environ.get("REPRO_BENCH_PROVE_FACTORS", "2,4").split(",")]
    repro = repro_exe()
    if repro is None:
        why = "the repro command is not installed (make install)"
        return [
            Row(f"diff --prove, {n} factors, {label}", "naive", None, None, INFO, "within", 0, skipped=why)
            for n in counts
            for label in ("whole runs", "windowed")
        ]
    rows: list[Row] = []
    with scratch("repro-bench-prove-") as proj:
        subprocess.run(["git", "init", "-q"], cwd=proj, check=True)
        (proj / "train.py").write_text(SCRIPT)
        (proj / ".gitignore").write_text("model.pt\ncheckpoints/\n")
        (proj / "repro.yaml").write_text("# benchmark project: no data, no dependencies\n")
        for n in counts:
            log(f"diff --prove with {n} factors, {steps} steps: whole runs and windowed, {repeats} round(s)")
            rows += _case(repro, proj, steps, n, repeats)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--factors", default=None, help="comma-separated counts, each at least 2")
    parser.add_argument("--repeats", type=int, default=int(os.environ.get("REPRO_BENCH_REPEATS", "1")))
    args = parser.parse_args()
    counts = [int(n) for n in args.factors.split(",")] if args.factors else None
    rows = run(args.repeats, args.steps, counts)
    print_rows(rows)
    for r in rows:
        if r.peer_s and r.repro_s:
            print(f"  {r.case}: naive {r.peer_s.wall:.1f} s, proof {r.repro_s.wall:.1f} s, ×{r.ratio():.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
