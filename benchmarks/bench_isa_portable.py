"""What `--isa portable` costs against `--isa avx2`, on the benchmark models, and whether each is bit-stable.

    python benchmarks/bench_isa_portable.py                     # 5 runs of each pin per model
    python benchmarks/bench_isa_portable.py --repeats 2 --steps 10   # a smoke test

`portable` keeps the AVX2 kernels of ATen, oneDNN and OpenBLAS and moves MKL to its COMPATIBLE
branch (README: CPU ISA pins), the one setting that gives the same float32 bits on Intel and AMD.
The two models of bench_strict_threads.py (a CNN and a transformer LM) train in separate
`repro run --backend local --mode strict --isa X` processes, avx2 and portable interleaved run by
run; the time is the training loop's own (the script prints it). Printed: the median of each pin,
the ratio portable / avx2, and whether every run of a pin saved the same weights.
Sizes: --steps (REPRO_BENCH_ISA_STEPS), --repeats (REPRO_BENCH_ISA_REPEATS).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import log, scratch
from bench_strict_threads import MODELS, _env, _repro_exe

from repro.store.hashing import hash_file

PINS = ("avx2", "portable")
_TRAINED = re.compile(r"trained (\d+) steps in ([0-9.]+) s")


def train_once(proj: Path, script: str, isa: str, steps: int) -> tuple[float, str]:
    """One `repro run` of ``script`` with ``--isa isa``: (training seconds, weights digest).

    Raises:
        RuntimeError: the run failed or printed no training time.
    """
    cmd = [_repro_exe(), "run", "--backend", "local", "--mode", "strict", "--isa", isa,
           "--", "python", script, "--steps", str(steps), "--save", "model.pt"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=proj, env=_env(None), capture_output=True, text=True, check=False)
    found = _TRAINED.search(proc.stdout + proc.stderr)
    if proc.returncode != 0 or found is None:
        tail = (proc.stderr or proc.stdout)[-1500:]
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {tail}")
    return float(found.group(2)), hash_file(proj / "model.pt")


def run(repeats: int, steps: int) -> list[str]:
    """One line per model: the medians, the ratio, bit-stability."""
    lines = []
    with scratch("repro-bench-isa-") as proj:
        (proj / "repro.yaml").write_text("# benchmark project: no data, no dependencies\n")
        (proj / "requirements.in").write_text("")
        for name, text in MODELS.values():
            (proj / name).write_text(text)
        log("first run compiles the lockfile (untimed)")
        train_once(proj, "cnn.py", "avx2", 2)
        for model, (script, _) in MODELS.items():
            times: dict[str, list[float]] = {pin: [] for pin in PINS}
            weights: dict[str, set[str]] = {pin: set() for pin in PINS}
            for i in range(repeats):
                for pin in PINS if i % 2 == 0 else reversed(PINS):  # interleaved, alternating order
                    seconds, digest = train_once(proj, script, pin, steps)
                    times[pin].append(seconds)
                    weights[pin].add(digest)
                    log(f"  {model} {pin}: {seconds:.3f} s")
            med = {pin: statistics.median(times[pin]) for pin in PINS}
            stable = ", ".join(f"{pin} {_stability(weights[pin])}" for pin in PINS)
            same = "same bits" if weights["avx2"] == weights["portable"] else "other bits"
            lines.append(
                f"{model}: avx2 median {med['avx2']:.3f} s, portable median {med['portable']:.3f} s, "
                f"ratio portable/avx2 {med['portable'] / med['avx2']:.2f}x over {repeats} runs each "
                f"({stable}; portable vs avx2: {same})"
            )
    return lines


def _stability(digests: set[str]) -> str:
    return "bit-stable" if len(digests) == 1 else f"{len(digests)} different weights"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=int(os.environ.get("REPRO_BENCH_ISA_REPEATS", "5")))
    parser.add_argument("--steps", type=int, default=int(os.environ.get("REPRO_BENCH_ISA_STEPS", "40")))
    args = parser.parse_args()
    for line in run(args.repeats, args.steps):
        print(line)


if __name__ == "__main__":
    main()
