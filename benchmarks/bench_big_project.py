"""A run in a large project outside git, against the bare command; `repro show` of that run.

    python benchmarks/bench_big_project.py

Rows: `repro run --backend local -- python train.py` in a project of 50,000 small source files (no
git: every file is in the code snapshot) against `python train.py` bare, and `repro show` of that
run against a bare `python -c pass`. The snapshot's file list is kept as a blob, so the record stays
small and `repro show` counts the files without reading it. Interleaved (peer, repro, …); medians.
Size: REPRO_BENCH_PROJECT_FILES (50000).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, log, median_sample, print_rows, repro_env, repro_exe, run_timed, scratch

TRAIN = """\
import argparse
from pathlib import Path
p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=1)
args = p.parse_args()
Path("checkpoints").mkdir(exist_ok=True)
Path("checkpoints/model.txt").write_text(f"epochs={args.epochs}\\n")
print("done")
"""


def _make_project(root: Path, n: int) -> None:
    for i in range(n):
        d = root / "src" / f"pkg{i // 500:03d}"
        if i % 500 == 0:
            d.mkdir(parents=True)
            (d / "__init__.py").write_text("")
        (d / f"mod{i:05d}.py").write_text(f"VALUE = {i}\n\ndef f(x):\n    return x + VALUE\n")


def run(repeats: int = 3) -> list[Row]:
    n = int(os.environ.get("REPRO_BENCH_PROJECT_FILES", "50000"))
    repro = repro_exe()
    case_run, case_show = f"repro run, project of {n:,} files outside git", "repro show of that run"
    if repro is None:
        why = "the repro command is not installed (make install)"
        return [
            Row(case_run, "`python train.py` bare", None, None, "< +2 s", "overhead", 2.0, skipped=why),
            Row(case_show, "bare `python -c pass`", None, None, "< +0.5 s", "overhead", 0.5, skipped=why),
        ]
    env = repro_env()
    with scratch("repro-bench-project-") as proj:
        (proj / "repro.yaml").write_text("# benchmark project: no data, no dependencies\n")
        (proj / "requirements.in").write_text("")
        (proj / "train.py").write_text(TRAIN)
        log(f"writing a project of {n:,} files")
        _make_project(proj, n)
        bare = ["python", "train.py"]
        ours = [repro, "run", "--backend", "local", "--", "python", "train.py"]
        log("first run: lockfile and the files' first hash (untimed)")
        run_timed(ours, cwd=proj, env=env)
        peer, timed, py, show = [], [], [], []
        for _ in range(repeats):
            peer.append(run_timed(bare, cwd=proj, env=env))
            timed.append(run_timed(ours, cwd=proj, env=env))
            py.append(run_timed(["python", "-c", "pass"], cwd=proj, env=env))
            show.append(run_timed([repro, "show", "latest"], cwd=proj, env=env))
        size = max((p.stat().st_size for p in (proj / ".repro" / "runs").glob("*/capsule.yaml")), default=0)
    note_run = (
        f"medians of interleaved runs, files unchanged since the first; capsule.yaml "
        f"{size / 1024:.0f} KiB (the file list is a blob)"
    )
    note_show = "medians; the code list is counted from the record, not read; most of it is the CLI's start"
    return [
        Row(case_run, "`python train.py` bare", median_sample(peer), median_sample(timed),
            "< +2 s", "overhead", 2.0, note=note_run),
        Row(case_show, "bare `python -c pass`", median_sample(py), median_sample(show),
            "< +0.5 s", "overhead", 0.5, note=note_show),
    ]  # fmt: skip


if __name__ == "__main__":
    print_rows(run(int(os.environ.get("REPRO_BENCH_REPEATS", "3"))))
