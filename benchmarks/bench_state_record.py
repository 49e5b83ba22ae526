"""The per-step state record `repro check --interrupt` compares, against the same training without it.

    python benchmarks/bench_state_record.py

The Hugging Face `Trainer` script and the Lightning script of the tests (tests/integration/scripts:
`hf_clm.py`, a 2-layer GPT-2 from a config with two DataLoader workers; `lightning_steps.py`, a
LightningModule and a LightningDataModule with two workers and a scheduler), a few hundred optimizer
steps each so that the per-step part dominates, run under repro's runtime as `repro run` starts them
(its `sitecustomize`, strict mode's environment, the same seed) with the state record
(``REPRO_RESUME_TRACE=1``, what `check --interrupt` sets) and without it, interleaved A B A B.
Each run's wall and CPU seconds (the process and its DataLoader workers), and the median CPU and
wall seconds between two optimizer steps, measured inside the process by one more step hook
(`_state_record_driver.py`). Medians of the repeats.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import INFO, PY, REPO, Row, Sample, log, print_rows, run_timed, scratch

SCRIPTS = REPO / "tests" / "integration" / "scripts"
DRIVER = Path(__file__).resolve().parent / "_state_record_driver.py"
PEER = "the same run under the runtime, no state record"


def _project(root: Path) -> None:
    """The scripts and their data: a text of 400 words, 960 labelled points."""
    (root / "data").mkdir(parents=True)
    shutil.copyfile(SCRIPTS / "hf_clm.py", root / "run_clm.py")
    shutil.copyfile(SCRIPTS / "lightning_steps.py", root / "train.py")
    words = "the cat sat on a mat while dog ran far away from home and back again".split()
    r = random.Random(5)
    (root / "data" / "text.txt").write_text(" ".join(r.choice(words) for _ in range(400)))
    r = random.Random(3)
    rows = [
        f"{r.gauss(c * 2 - 1, 0.7):.5f},{r.gauss(1 - c * 2, 0.7):.5f},{c}"
        for c in (i % 2 for i in range(960))
    ]
    (root / "data" / "points.csv").write_text("\n".join(rows) + "\n")


def _env(root: Path, runtime: Path, record: bool) -> dict[str, str]:
    """The environment `repro run --mode strict` gives a command (the runtime's part of it)."""
    inject = REPO / "repro" / "runtime" / "inject"
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPRO_")}
    env.update(
        PYTHONPATH=f"{inject}{os.pathsep}{REPO}",
        REPRO_RUN_ID="bench-state-record",
        REPRO_RUNTIME_DIR=str(runtime),
        REPRO_PROJECT_ROOT=str(root),
        REPRO_SEED="7",
        REPRO_MODE="strict",
        REPRO_THREADS="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        REPRO_LOADER_SEEDS="1",
        CUDA_VISIBLE_DEVICES="",
        TOKENIZERS_PARALLELISM="false",
    )
    if record:
        env["REPRO_RESUME_TRACE"] = "1"
    return env


def _once(root: Path, command: list[str], record: bool, n: int) -> tuple[float, float, dict[str, float]]:
    """One run from scratch: (wall, CPU seconds, the driver's per-step figures)."""
    for name in ("checkpoints", "outputs"):
        shutil.rmtree(root / name, ignore_errors=True)
    runtime = root / f"runtime-{n}-{int(record)}"
    runtime.mkdir()
    out = root / f"steps-{n}-{int(record)}.json"
    wall, cpu = run_timed([PY, str(DRIVER), str(out), *command], cwd=root, env=_env(root, runtime, record))
    steps: dict[str, float] = json.loads(out.read_text())
    if record and not list(runtime.glob("rtrace*.jsonl")):
        raise RuntimeError(f"{command[0]}: no state record written")
    shutil.rmtree(runtime, ignore_errors=True)
    return wall, cpu, steps


def _sample(values: list[tuple[float, float]]) -> Sample:
    s = Sample()
    for wall, cpu in values:
        s.add(wall, cpu)
    s.wall, s.cpu = statistics.median(w for w, _ in values), statistics.median(c for _, c in values)
    return s


def _rows(name: str, runs: dict[bool, list[tuple[float, float, dict[str, float]]]]) -> list[Row]:
    plain, recorded = runs[False], runs[True]
    steps = int(recorded[0][2]["steps"])
    whole = Row(
        f"{name}, {steps} optimizer steps: the whole run",
        PEER,
        _sample([(w, c) for w, c, _ in plain]),
        _sample([(w, c) for w, c, _ in recorded]),
        "<= 1.05x",
        "within",
        1.05,
        note="medians of interleaved runs; judged by CPU time (the process and its DataLoader workers),"
        " steadier than wall-clock time on a shared machine; both shown",
    )
    whole.judge_cpu = True
    per_step = Row(
        f"{name}: one optimizer step (median)",
        PEER,
        _sample([(s["step_wall"], s["step_cpu"]) for _, _, s in plain]),
        _sample([(s["step_wall"], s["step_cpu"]) for _, _, s in recorded]),
        INFO,
        "within",
        0.0,
        note="the time between two optimizer steps inside the training process, median over the run",
    )
    return [whole, per_step]


def run(repeats: int = 3) -> list[Row]:
    epochs = os.environ.get("REPRO_BENCH_RECORD_EPOCHS", "10")  # the Trainer's: 27 steps an epoch
    cases = {
        "HF Trainer run_clm.py (tiny GPT-2, 2 workers)": [
            "run_clm.py", "--augment", "--save_steps", "100", "--num_train_epochs", epochs,
        ],
        "Lightning fit (LightningDataModule, 2 workers)": [
            "train.py", "--epochs", str(max(int(epochs) // 3, 1)), "--every", "100",
        ],
    }  # fmt: skip
    rows = []
    with scratch("repro-bench-record-") as root:
        _project(root)
        for name, command in cases.items():
            log(f"{name}: {repeats} runs each way, interleaved")
            runs: dict[bool, list[tuple[float, float, dict[str, float]]]] = {False: [], True: []}
            _once(root, command, False, -1)  # warm: page cache, bytecode
            for n in range(repeats):
                for record in (False, True) if n % 2 == 0 else (True, False):
                    runs[record].append(_once(root, command, record, n))
            rows += _rows(name, runs)
    return rows


if __name__ == "__main__":
    print_rows(run(int(os.environ.get("REPRO_BENCH_REPEATS", "3"))))
