"""The price of determinism, measured as Megatron-LM measures its deterministic mode: strict vs `--mode off`.

    python benchmarks/bench_determinism_price.py              # 4 pairs of each workload and thread setting
    python benchmarks/bench_determinism_price.py --pairs 2 --steps 15 --warmup 5   # a smoke test
    python benchmarks/bench_determinism_price.py --strict-arg=--isa=none   # strict without its ISA pin

Protocol: paired runs, each a fresh `repro run --backend local` process, the order of strict and off
alternating from pair to pair (strict first in even pairs); the first ``--warmup`` optimizer steps are
left out of each run's time (the script times the rest itself, so torch's import and repro's start-up
do not count); the ratio strict/off is taken per pair, summarised as the geometric mean of the pairs'
ratios with a 95% percentile-bootstrap confidence interval over pairs (10,000 resamples, fixed seed).

Workloads, in the shape of public code (benchmarks/_price_workloads.py): a CNN fed by DataLoader
workers (pytorch/examples mnist), a small GPT in nanoGPT's style (AdamW, weight tying, gradient
clipping, SDPA attention) and an LSTM language model (pytorch/examples word_language_model).

Thread settings: equal threads (1, then 2: strict `--threads N`, off `OMP_NUM_THREADS=N`), and each
mode's own default (strict: no `--threads`, i.e. the CPUs the run may use; off: torch's default, no
variable set). Where both defaults are a count already measured at equal threads, the row says so
instead of measuring the same setting twice. Every strict run's saved weights are hashed: the table
says how many distinct results the strict runs of each setting gave (1 = bit-stable run to run).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PY, log, repro_env, repro_exe, scratch
from _price_workloads import WORKLOADS

from repro.facts.cpus import usable_cpus
from repro.store.hashing import hash_file

_TIMED = re.compile(r"timed (\d+) steps in ([0-9.]+) s with (\d+) threads")
_SAVED = {"cnn.py": "model.pt", "gpt.py": "ckpt.pt", "lstm.py": "model.pt"}


@dataclass
class Setting:
    """How many threads each mode runs at (None: the mode's default)."""

    label: str
    strict: int | None
    off: int | None


@dataclass
class Pairs:
    """The paired runs of one workload at one setting."""

    strict_s: list[float] = field(default_factory=list)
    off_s: list[float] = field(default_factory=list)
    weights: list[str] = field(default_factory=list)
    threads: set[tuple[str, int]] = field(default_factory=set)

    def ratios(self) -> list[float]:
        return [s / o for s, o in zip(self.strict_s, self.off_s, strict=True)]


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def bootstrap_ci(ratios: list[float], resamples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the geometric mean of paired ratios."""
    rng = random.Random(seed)
    means = sorted(geomean(rng.choices(ratios, k=len(ratios))) for _ in range(resamples))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def off_default_threads() -> int:
    """torch's own intra-op thread count in a fresh process with no thread variable set."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    code = "import torch; print(torch.get_num_threads())"
    return int(subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)


def _env(threads: int | None) -> dict[str, str]:
    env = repro_env()
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "REPRO_THREADS", "REPRO_MODE"):
        env.pop(name, None)
    if threads is not None:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    return env


def train_once(
    proj: Path, script: str, mode: str, threads: int | None, args: argparse.Namespace
) -> tuple[float, int]:
    """One `repro run` of ``script``: (seconds of its timed steps, the threads torch ran at).

    Raises:
        RuntimeError: the run failed or printed no time.
    """
    cmd = [repro_exe() or "repro", "run", "--backend", "local", "--mode", mode]
    if mode == "strict" and threads is not None:
        cmd += ["--threads", str(threads)]
    if mode == "strict":
        cmd += getattr(args, "strict_arg", None) or []
    cmd += ["--", "python", script, "--steps", str(args.steps), "--warmup", str(args.warmup)]
    proc = subprocess.run(
        cmd, cwd=proj, env=_env(threads if mode == "off" else None), capture_output=True, text=True
    )
    found = _TIMED.search(proc.stdout + proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(
            f"{' '.join(cmd)} exited {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}"
        )
    return float(found.group(2)), int(found.group(3))


def measure(proj: Path, script: str, setting: Setting, args: argparse.Namespace) -> Pairs:
    """``args.pairs`` pairs, strict first in even pairs and off first in odd ones."""
    pairs = Pairs()
    for i in range(args.pairs):
        order = ("strict", "off") if i % 2 == 0 else ("off", "strict")
        for mode in order:
            seconds, seen = train_once(proj, script, mode, getattr(setting, mode), args)
            pairs.threads.add((mode, seen))
            if mode == "strict":
                pairs.strict_s.append(seconds)
                pairs.weights.append(hash_file(proj / _SAVED[script]))
            else:
                pairs.off_s.append(seconds)
        times = f"strict {pairs.strict_s[-1]:.3f} s, off {pairs.off_s[-1]:.3f} s"
        log(f"  {script} {setting.label} pair {i + 1}: {times}")
    return pairs


def settings(equal: list[int]) -> list[Setting]:
    """Equal threads at each count, then each mode's default unless both defaults are one of those."""
    found = [Setting(f"{n} thread{'s' if n > 1 else ''} each", n, n) for n in equal]
    strict_default, off_default = usable_cpus(), off_default_threads()
    label = f"defaults (strict {strict_default}, off {off_default})"
    if strict_default == off_default and strict_default in equal:
        log(f"{label}: the {strict_default}-thread setting, measured once")
    else:
        found.append(Setting(label, None, None))
    return found


def row(workload: str, setting: Setting, pairs: Pairs) -> str:
    ratios = pairs.ratios()
    low, high = bootstrap_ci(ratios)
    seen = ", ".join(f"{mode} {n}" for mode, n in sorted(pairs.threads))
    results = len(set(pairs.weights))
    return (
        f"| {workload} | {setting.label} ({seen}) | {statistics.median(pairs.off_s):.3f} | "
        f"{statistics.median(pairs.strict_s):.3f} | ×{geomean(ratios):.2f} | ×{low:.2f}–×{high:.2f} | "
        f"{len(pairs.weights)} runs, {results} result{'s' if results > 1 else ''} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=int(os.environ.get("REPRO_BENCH_PRICE_PAIRS", "4")))
    parser.add_argument("--steps", type=int, default=int(os.environ.get("REPRO_BENCH_PRICE_STEPS", "30")))
    parser.add_argument("--warmup", type=int, default=5, help="steps left out of each run's time")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="equal thread counts")
    parser.add_argument("--only", choices=[script for script, _ in WORKLOADS.values()], nargs="+")
    parser.add_argument(
        "--strict-arg", action="append", metavar="ARG",
        help="an option of the strict runs' `repro run`, e.g. --strict-arg=--isa=none (the ISA pin's share)",
    )  # fmt: skip
    args = parser.parse_args()
    load = os.getloadavg()[0]
    lines = []
    with scratch("repro-bench-price-") as proj:
        (proj / "repro.yaml").write_text("# benchmark project: no data, no dependencies\n")
        (proj / "requirements.in").write_text("")
        for script, text in WORKLOADS.values():
            (proj / script).write_text(text)
        log("first run compiles the lockfile (untimed)")
        train_once(proj, "lstm.py", "strict", 1, argparse.Namespace(steps=2, warmup=1))
        chosen = settings(args.threads)
        for workload, (script, _) in WORKLOADS.items():
            if args.only and script not in args.only:
                continue
            for setting in chosen:
                lines.append(row(workload, setting, measure(proj, script, setting, args)))
    extra = f"; strict runs with {' '.join(args.strict_arg)}" if args.strict_arg else ""
    print(f"{args.pairs} pairs each, {args.steps - args.warmup} timed steps a run after {args.warmup} "
          f"warm-up steps; {usable_cpus()} usable CPUs; load average {load:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end{extra}")  # fmt: skip
    print("| workload | threads | off (s, median) | strict (s, median) | strict/off (geomean) | 95% CI "
          "| strict runs' weights |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
