"""The cost of `repro diff A B --prove` against the number of factors, on a 300-step run.

    python benchmarks/bench_prove.py                    # 2 and 4 factors, 300 steps
    python benchmarks/bench_prove.py --factors 2 --steps 50     # a smoke test

Run A trains an MLP for --steps optimizer steps (strict mode, local backend); run B differs in N
factors: the seed and the learning rate (each changes the result) and N-2 options the script ignores.
The proof executes each factor alone, then the two causes together: N+1 executions, each a whole
run (windowed experiments from a checkpoint are not made yet). The peer is the naive experiment: one
whole bare execution of the script per factor (N executions at one intra-op thread, as strict mode
runs them; no tool, no comparison). Reported: the executions, wall and CPU seconds of each, the ratio.

Sizes: --steps (REPRO_BENCH_PROVE_STEPS), --factors (REPRO_BENCH_PROVE_FACTORS, comma-separated).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import INFO, Row, Sample, log, print_rows, repro_env, repro_exe, scratch

SCRIPT = '''"""An MLP on synthetic data, seeded by its own --seed (as public training scripts are)."""
import argparse

import torch
from torch import nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args, _ = parser.parse_known_args()  # options for other tools (--note-N) are ignored
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    x, y = torch.randn(1024, 64), torch.randint(0, 10, (1024,))
    for step in range(args.steps):
        i = torch.randint(0, 1024, (64,))
        loss = nn.functional.cross_entropy(model(x[i]), y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
'''


def _argv(steps: int, seed: int, lr: float, notes: int) -> list[str]:
    extra = [t for i in range(notes) for t in (f"--note-{i}", "b")]
    return ["python", "train.py", "--steps", str(steps), "--seed", str(seed), "--lr", str(lr), *extra]


def _run(repro: str, proj: Path, argv: list[str]) -> str:
    cmd = [repro, "run", "--backend", "local", "--seed", "7", "--", *argv]  # one master seed: not a factor
    subprocess.run(
        cmd, cwd=proj, env=repro_env(), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    shown = subprocess.run(
        [repro, "show", "latest", "--json"], cwd=proj, env=repro_env(), capture_output=True
    )
    return str(json.loads(shown.stdout)["id"])


# The peer runs at the one intra-op thread strict mode pins (README: Threads), as the proof's runs do.
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def _timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(wall, CPU of the children, stdout) of one command that must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env={**repro_env(), **(env or {})}, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)!r} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.stdout


def _case(repro: str, proj: Path, steps: int, factors: int) -> tuple[Sample, Sample, int]:
    """(the naive peer, the proof, the proof's executions) for run B differing in ``factors``."""
    a = _run(repro, proj, _argv(steps, 1, 1e-3, 0))
    b = _run(repro, proj, _argv(steps, 2, 2e-3, factors - 2))
    naive = [_argv(steps, 2, 1e-3, 0), _argv(steps, 1, 2e-3, 0)]
    naive += [[*_argv(steps, 1, 1e-3, 0), f"--note-{i}", "b"] for i in range(factors - 2)]
    peer = Sample()
    timed = [_timed(argv, proj, ONE_THREAD) for argv in naive]
    peer.add(sum(t[0] for t in timed), sum(t[1] for t in timed))
    wall, cpu, out = _timed([repro, "diff", a, b, "--prove", "--json"], proj)
    proof = json.loads(out)["proof"]
    if sorted(proof["proved"]) != ["param:lr", "param:seed"]:
        raise RuntimeError(f"the proof found {proof['proved']}, not the seed and the learning rate")
    proved = Sample()
    proved.add(wall, cpu)
    return peer, proved, int(proof["executions"])


def run(repeats: int = 1, steps: int | None = None, counts: list[int] | None = None) -> list[Row]:
    """One row per number of factors (``repeats`` is not used: one proof per row, minutes each)."""
    steps = steps or int(os.environ.get("REPRO_BENCH_PROVE_STEPS", "300"))
    counts = counts or [int(n) for n in os.environ.get("REPRO_BENCH_PROVE_FACTORS", "2,4").split(",")]
    repro = repro_exe()
    if repro is None:
        why = "the repro command is not installed (make install)"
        return [
            Row(f"diff --prove, {n} factors", "naive", None, None, INFO, "within", 0, skipped=why)
            for n in counts
        ]
    rows = []
    with scratch("repro-bench-prove-") as proj:
        subprocess.run(["git", "init", "-q"], cwd=proj, check=True)
        (proj / "train.py").write_text(SCRIPT)
        (proj / ".gitignore").write_text("model.pt\n")
        (proj / "repro.yaml").write_text("# benchmark project: no data, no dependencies\n")
        for n in counts:
            log(f"diff --prove with {n} factors, {steps} steps")
            peer, proved, executions = _case(repro, proj, steps, n)
            note = (
                f"{executions} executions by the proof (whole runs, compared with A and B) vs {n} bare runs"
            )
            rows.append(Row(f"diff --prove, {n} factors ({steps} steps)", "one bare run per factor",
                            peer, proved, INFO, "within", 0, note=note))  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--factors", default=None, help="comma-separated counts, each at least 2")
    args = parser.parse_args()
    counts = [int(n) for n in args.factors.split(",")] if args.factors else None
    rows = run(1, args.steps, counts)
    print_rows(rows)
    for r in rows:
        if r.peer_s and r.repro_s:
            print(f"  {r.case}: naive {r.peer_s.wall:.1f} s, proof {r.repro_s.wall:.1f} s, ×{r.ratio():.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
