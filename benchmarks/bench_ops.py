"""The cost of `repro replay RUN --ops` against the plain replay of the same run.

    python benchmarks/bench_ops.py                 # 3 interleaved pairs per case
    python benchmarks/bench_ops.py --repeats 1     # a smoke test

A residual MLP with a convolutional stem trains for --steps optimizer steps on CPU (strict mode,
local backend). Two cases, each run recorded once and then replayed plain and with --ops,
interleaved (plain, --ops, plain, --ops …); medians of the whole `repro replay` command:

- an identical replay: --ops only records the op stream of the first 2 steps in the replay;
- a replay that diverges (block 2 adds a value from OS entropy): --ops also re-executes the
  original's command for its op stream, stopped after those 2 steps, and compares the streams.

Sizes: --steps (REPRO_BENCH_OPS_STEPS), --repeats (REPRO_BENCH_REPEATS).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    INFO,
    Row,
    Sample,
    interleaved,
    log,
    print_rows,
    recorded,
    repro_exe,
    scratch,
    timed_output,
)

SCRIPT = '''"""A convolutional stem and residual MLP blocks on synthetic images."""
import argparse
import os

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, width, noisy):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.noisy = noisy

    def forward(self, x):
        h = torch.relu(self.fc(x))
        if self.noisy:
            h = h + 1e-7 * int.from_bytes(os.urandom(2), "little")
        return x + h


class Net(nn.Module):
    def __init__(self, width, depth, noisy_block):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten()
        )
        self.embed = nn.Linear(128, width)
        self.blocks = nn.ModuleList(Block(width, i == noisy_block) for i in range(depth))
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        x = self.embed(self.stem(x))
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--noisy-block", type=int, default=-1)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Net(256, 4, args.noisy_block)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    images, labels = torch.randn(512, 1, 28, 28), torch.randint(0, 10, (512,))
    for step in range(args.steps):
        i = torch.randint(0, 512, (64,))
        loss = nn.functional.cross_entropy(model(images[i]), labels[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
'''


def _case(repro: str, proj: Path, steps: int, repeats: int, noisy: bool) -> tuple[Sample, Sample]:
    argv = ["python", "train.py", "--steps", str(steps), *(["--noisy-block", "2"] if noisy else [])]
    ref = recorded(repro, proj, argv)  # by its id: the replays below become `latest`
    codes = (5,) if noisy else (0,)

    def replay(*more: str) -> Callable[[], tuple[float, float]]:
        return lambda: timed_output([repro, "replay", ref, "--backend", "local", *more], proj, codes=codes)[
            :2
        ]

    plain, ops = interleaved(repeats, [replay(), replay("--ops")])
    return plain, ops


def run(repeats: int = 3, steps: int | None = None) -> list[Row]:
    """Rows for an identical replay and a diverging one."""
    steps = steps or int(os.environ.get("REPRO_BENCH_OPS_STEPS", "200"))
    repro = repro_exe()
    cases = (
        (f"replay --ops, identical ({steps} steps)", False),
        (f"replay --ops, diverged ({steps} steps)", True),
    )
    if repro is None:
        why = "the repro command is not installed (make install)"
        return [Row(case, "plain replay", None, None, INFO, "within", 0, skipped=why) for case, _ in cases]
    rows = []
    with scratch("repro-bench-ops-") as proj:
        subprocess.run(["git", "init", "-q"], cwd=proj, check=True)
        (proj / "train.py").write_text(SCRIPT)
        (proj / "repro.yaml").write_text("# benchmark project: no data, no dependencies\n")
        for case, noisy in cases:
            log(f"{case}: {repeats} interleaved pairs")
            plain, ops = _case(repro, proj, steps, repeats, noisy)
            note = f"medians of {repeats} interleaved pairs (shown in the best columns); " + (
                "records the first 2 steps' op stream in the replay"
                if not noisy
                else "also re-executes the original for 2 steps and compares the op streams"
            )
            rows.append(Row(case, "plain replay of the same run", plain, ops, INFO, "within", 0, note=note))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=int(os.environ.get("REPRO_BENCH_REPEATS", "3")))
    parser.add_argument("--steps", type=int, default=None)
    args = parser.parse_args()
    rows = run(args.repeats, args.steps)
    print_rows(rows)
    for r in rows:
        if r.peer_s and r.repro_s:
            print(f"  {r.case}: plain {r.peer_s.wall:.2f} s, --ops {r.repro_s.wall:.2f} s, ×{r.ratio():.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
