"""Strict mode's thread count: are the weights bit-stable at N intra-op threads, what does
each N cost, and what does strict cost against `--mode off` at the same N?

    python benchmarks/bench_strict_threads.py                # 1, 2 and all cores; 6 strict runs each
    python benchmarks/bench_strict_threads.py --repeats 3 --steps 10   # a smoke test

Two small models train on CPU, each run a separate `repro run --backend local` process: a
CNN on 28x28 images and a transformer language model (both torch.nn only). Every strict run
at N threads (`repro run --mode strict --threads N`) hashes the saved weights; N is bit-stable
when every run gave the same bytes. `--mode off` runs get N threads through OMP_NUM_THREADS
(off mode pins nothing). Time is the training loop's own (the script prints it), so torch's
import and repro's start-up do not blur the ratio; CPU is user+system of the whole run.
Strict and off runs are interleaved.
Sizes: --steps (REPRO_BENCH_THREADS_STEPS), --repeats (REPRO_BENCH_THREADS_REPEATS).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import INFO, PY, Row, Sample, log, print_rows, scratch

from repro.store.hashing import hash_file

CNN = '''"""Train a small CNN on synthetic 28x28 digits (a stand-in for MNIST)."""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1)
        self.conv2 = nn.Conv2d(16, 32, 3, 1)
        self.dropout = nn.Dropout(0.25)
        self.fc1 = nn.Linear(32 * 12 * 12, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = self.dropout(torch.flatten(x, 1))
        return self.fc2(torch.relu(self.fc1(x)))


def main():
    parser = argparse.ArgumentParser(description="CNN on synthetic digits")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--save", default="model.pt")
    args = parser.parse_args()
    torch.manual_seed(1337)
    images = torch.randn(args.batch_size * 8, 1, 28, 28)
    labels = torch.randint(0, 10, (len(images),))
    loader = DataLoader(TensorDataset(images, labels), batch_size=args.batch_size, shuffle=True)
    model = Net()
    opt = torch.optim.Adadelta(model.parameters(), lr=args.lr)
    step, start = 0, time.perf_counter()
    while step < args.steps:
        for x, y in loader:
            if torch.rand(()) < 0.5:
                x = torch.flip(x, dims=[3])  # random augmentation
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 10 == 0:
                ms = (time.perf_counter() - start) * 1000 / step
                print(f"step {step:4d} | loss {loss.item():.4f} | {ms:.1f} ms/batch")
            if step == args.steps:
                break
    train_s = time.perf_counter() - start
    print(f"trained {step} steps in {train_s:.3f} s with {torch.get_num_threads()} threads")
    torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
'''

TRANSFORMER = '''"""Train a small transformer language model on synthetic characters."""
import argparse
import math
import time

import torch
from torch import nn


class TransformerLM(nn.Module):
    def __init__(self, vocab, d_model=64, nhead=4, layers=2, ff=128, dropout=0.1):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(1, 512, d_model))
        layer = nn.TransformerEncoderLayer(d_model, nhead, ff, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, vocab)
        self.d_model = d_model

    def forward(self, idx):
        n = idx.size(1)
        mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        h = self.embed(idx) * math.sqrt(self.d_model) + self.pos[:, :n]
        return self.head(self.encoder(h, mask=mask, is_causal=True))


def main():
    parser = argparse.ArgumentParser(description="transformer LM on synthetic text")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--bptt", type=int, default=64)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--save", default="model.pt")
    args = parser.parse_args()
    torch.manual_seed(1337)
    vocab = 65
    text = torch.randint(0, vocab, (args.batch_size * args.bptt * 8 + 1,))
    model = TransformerLM(vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        ix = torch.randint(0, len(text) - args.bptt - 1, (args.batch_size,))
        x = torch.stack([text[i : i + args.bptt] for i in ix])
        y = torch.stack([text[i + 1 : i + 1 + args.bptt] for i in ix])
        loss = nn.functional.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        if step % 10 == 0:
            ms = (time.perf_counter() - start) * 1000 / step
            print(f"| step {step:4d} | {ms:6.1f} ms/batch | loss {loss.item():.4f}")
    train_s = time.perf_counter() - start
    print(f"trained {args.steps} steps in {train_s:.3f} s with {torch.get_num_threads()} threads")
    torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
'''

MODELS = {"CNN": ("cnn.py", CNN), "transformer": ("transformer_lm.py", TRANSFORMER)}
_TRAINED = re.compile(r"trained (\d+) steps in ([0-9.]+) s with (\d+) threads")


@dataclass
class Runs:
    """The runs of one model in one mode at one thread count."""

    train: Sample = field(default_factory=Sample)
    cpu: list[float] = field(default_factory=list)
    weights: list[str] = field(default_factory=list)
    threads_seen: set[int] = field(default_factory=set)

    def stable(self) -> bool:
        return len(set(self.weights)) == 1


def _repro_exe() -> str:
    beside = Path(sys.executable).parent / "repro"
    return str(beside) if beside.exists() else "repro"


def _env(threads: int | None) -> dict[str, str]:
    # `python` is this interpreter under repro too; off mode gets its threads from OpenMP's variable.
    env = {
        **os.environ,
        "PATH": f"{Path(PY).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "NO_COLOR": "1",
    }
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "REPRO_THREADS", "REPRO_MODE"):
        env.pop(name, None)
    if threads is not None:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    return env


def train_once(proj: Path, script: str, mode: str, threads: int, steps: int, runs: Runs) -> None:
    """One `repro run` of `script`; adds its training time, CPU time and weight hash to `runs`.

    Raises:
        RuntimeError: the run failed or printed no training time.
    """
    cmd = [_repro_exe(), "run", "--backend", "local", "--mode", mode]
    if mode != "off":
        cmd += ["--threads", str(threads)]
    cmd += ["--", "python", script, "--steps", str(steps), "--save", "model.pt"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=proj, env=_env(threads if mode == "off" else None), capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    found = _TRAINED.search(proc.stdout + proc.stderr)  # repro streams the script's log on stderr
    if proc.returncode != 0 or found is None:
        raise RuntimeError(
            f"{' '.join(cmd)} exited {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    runs.train.add(float(found.group(2)), cpu)
    runs.cpu.append(cpu)
    runs.threads_seen.add(int(found.group(3)))
    runs.weights.append(hash_file(proj / "model.pt"))
    log(f"  {script} {mode} {threads} thread(s): train {found.group(2)} s, run {wall:.1f} s, cpu {cpu:.1f} s")


def thread_counts() -> list[int]:
    """1, 2 and all cores, without repeats."""
    return sorted({1, min(2, os.cpu_count() or 1), os.cpu_count() or 1})


def _stability(model: str, n: int, runs: Runs, base: Runs | None) -> str:
    distinct = len(set(runs.weights))
    verdict = "bit-stable" if distinct == 1 else f"NOT stable: {distinct} different weights"
    same = ""
    if base is not None and base is not runs:
        same = (
            ", same bits as 1 thread"
            if set(runs.weights) == set(base.weights)
            else ", other bits than 1 thread"
        )
    seen = ",".join(str(t) for t in sorted(runs.threads_seen))
    return f"{model} strict, {n} thread(s): {len(runs.weights)} runs, {verdict}{same} (torch saw {seen})"


def run(repeats: int = 6, steps: int | None = None) -> list[Row]:
    """Rows per model: strict vs off at each N (target <= 1.1x), and strict N vs strict 1 thread."""
    steps = steps or int(os.environ.get("REPRO_BENCH_THREADS_STEPS", "40"))
    counts = thread_counts()
    rows: list[Row] = []
    with scratch("repro-bench-threads-") as proj:
        (proj / "repro.yaml").write_text("# benchmark project: no data, no dependencies\n")
        (proj / "requirements.in").write_text("")
        for name, text in MODELS.values():
            (proj / name).write_text(text)
        log("first run compiles the lockfile (untimed)")
        train_once(proj, "cnn.py", "strict", 1, 2, Runs())
        for model, (script, _) in MODELS.items():
            strict = {n: Runs() for n in counts}
            off = {n: Runs() for n in counts}
            log(f"{model}: {repeats} strict runs and {max(2, repeats // 2)} off runs at {counts} thread(s)")
            for i in range(repeats):
                for n in counts:
                    train_once(proj, script, "strict", n, steps, strict[n])
                    if i < max(2, repeats // 2):
                        train_once(proj, script, "off", n, steps, off[n])
            for n in counts:
                note = _stability(model, n, strict[n], strict[1])
                offs = f"off: {len(set(off[n].weights))} distinct weights in {len(off[n].weights)} runs"
                rows.append(
                    Row(
                        f"{model}, strict vs off, {n} thread(s), train loop",
                        f"`--mode off`, {n} thread(s)",
                        off[n].train,
                        strict[n].train,
                        "<= 1.1x",
                        "within",
                        1.1,
                        note=f"{note}; {offs}",
                    )
                )
            for n in counts[1:]:
                rows.append(
                    Row(
                        f"{model}, strict {n} threads vs strict 1 thread",
                        "strict, 1 thread",
                        strict[1].train,
                        strict[n].train,
                        INFO,
                        "speedup",
                        0.0,
                        note="the speed-up `--threads N` buys; bit-stability is in the rows above",
                    )
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--repeats", type=int, default=int(os.environ.get("REPRO_BENCH_THREADS_REPEATS", "6"))
    )
    parser.add_argument("--steps", type=int, help="training steps per run (40, or REPRO_BENCH_THREADS_STEPS)")
    args = parser.parse_args()
    print_rows(run(args.repeats, args.steps))


if __name__ == "__main__":
    main()
