"""Traced runs' checkpoint copies in the store, with and without `store.max_bytes`.

    python benchmarks/bench_store_budget.py

A script saves REPRO_BENCH_CKPTS (3) checkpoints of REPRO_BENCH_CKPT_MB (64) MiB under
`repro run --trace` (each distinct checkpoint is copied into the store); it runs
REPRO_BENCH_BUDGET_RUNS (3) times in a project without a budget and in one with
`store.max_bytes` at 4.5 checkpoints' worth, interleaved. The row gives each side's median run
time; the note, the bytes each store keeps (the budget keeps each run's latest checkpoint
whatever its size).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import INFO, Row, log, median_sample, print_rows, repro_env, repro_exe, run_timed, scratch

SAVER = """\
import argparse, os
import torch
p = argparse.ArgumentParser()
p.add_argument("--mb", type=int, default=64)
p.add_argument("--n", type=int, default=3)
args = p.parse_args()
model = torch.nn.Linear(1, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
os.makedirs("checkpoints", exist_ok=True)
for epoch in range(args.n):
    opt.zero_grad(); model(torch.ones(1, 1)).sum().backward(); opt.step()
    torch.save({"w": torch.randn(args.mb << 18), "epoch": epoch}, "checkpoints/last.pt")
"""


def _store_bytes(proj: Path) -> int:
    blobs = proj / ".repro" / "blobs"
    return sum(p.stat().st_size for p in blobs.rglob("*") if p.is_file()) if blobs.is_dir() else 0


def run(repeats: int = 3) -> list[Row]:
    mb = int(os.environ.get("REPRO_BENCH_CKPT_MB", "64"))
    n = int(os.environ.get("REPRO_BENCH_CKPTS", "3"))
    runs = int(os.environ.get("REPRO_BENCH_BUDGET_RUNS", str(repeats)))
    budget_mb = 4 * mb + mb // 2  # room for 4 checkpoints (each a little over MB MiB)
    budget = budget_mb << 20
    case = f"{runs} traced runs x {n} checkpoints of {mb} MiB, store.max_bytes {budget_mb} MiB"
    repro = repro_exe()
    if repro is None:
        why = "the repro command is not installed (make install)"
        return [Row(case, "the same runs, no budget", None, None, INFO, "within", 0.0, skipped=why)]
    env = repro_env()
    with scratch("repro-bench-budget-") as root:
        projects = {"free": root / "free", "bounded": root / "bounded"}
        for name, proj in projects.items():
            proj.mkdir()
            limit = f"store:\n  max_bytes: {budget}\n" if name == "bounded" else ""
            (proj / "repro.yaml").write_text(f"# benchmark project\n{limit}")
            (proj / "requirements.in").write_text("")
            (proj / "save.py").write_text(SAVER)
        cmd = [
            repro,
            "run",
            "--backend",
            "local",
            "--trace",
            "--",
            "python",
            "save.py",
            "--mb",
            str(mb),
            "--n",
            str(n),
        ]
        times: dict[str, list[float]] = {"free": [], "bounded": []}
        for i in range(runs):
            log(f"run {i + 1} of {runs}, each way")
            for name, proj in projects.items():
                times[name].append(run_timed(cmd, cwd=proj, env=env)[0])
        kept = {name: _store_bytes(proj) >> 20 for name, proj in projects.items()}
    note = (
        f"store blobs after the runs: {kept['free']} MiB without a budget, {kept['bounded']} MiB with "
        f"{budget_mb} MiB (each run's latest checkpoint copy always stays); times are whole `repro run`s"
    )
    free, bounded = (median_sample([(v, v) for v in times[k]]) for k in ("free", "bounded"))
    return [Row(case, "the same runs, no budget", free, bounded, INFO, "within", 0.0, note=note)]


if __name__ == "__main__":
    print_rows(run())
