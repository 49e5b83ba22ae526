"""The command line's start-up (`repro --help`, `repro ls` of a project with one run), and `repro ls`
with its index missing or garbage: rebuilt from 100 records of runs with 20k untracked files each,
all against a bare `python -c pass`.

    python benchmarks/bench_ls_noindex.py

The start-up rows are the fixed cost every command pays before it does its work (importing the
command line and the one command's module): medians of at least 11 interleaved runs.

One genuine run in a git project with 20,000 untracked files is made; its record is copied under 99
more run ids (each copy a whole record, its file lists kept as the same blobs). `repro ls` then
lists them with the index removed, and with the index overwritten by garbage: each record is
parsed, its long lists never. Interleaved (peer, repro, …); medians.
Sizes: REPRO_BENCH_LS_RUNS (100), REPRO_BENCH_LS_FILES (20000).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, interleaved, log, median_sample, print_rows, repro_env, repro_exe, run_timed, scratch

TRAIN = "from pathlib import Path\nPath('model.txt').write_text('weights\\n')\nprint('done')\n"

HELP_CASE, LS_CASE = "repro --help (start-up)", "repro ls, a project with one run (start-up)"


def _git(proj: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=proj, check=True, capture_output=True)


def _make_runs(proj: Path, repro: str, env: dict[str, str], runs: int, files: int) -> None:
    (proj / "repro.yaml").write_text("# benchmark project: no data, no dependencies\n")
    (proj / "requirements.in").write_text("")
    (proj / "train.py").write_text(TRAIN)
    _git(proj, "init", "-q")
    _git(proj, "add", "repro.yaml", "requirements.in", "train.py")
    _git(proj, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-qm", "init")
    for i in range(files):
        d = proj / "scratch" / f"d{i // 1000:02d}"
        if i % 1000 == 0:
            d.mkdir(parents=True)
        (d / f"note{i:05d}.txt").write_text(f"untracked {i}\n")
    log(f"one genuine run with {files:,} untracked files")
    run_timed([repro, "run", "--backend", "local", "--", "python", "train.py"], cwd=proj, env=env)
    runs_dir = proj / ".repro" / "runs"
    (first,) = [p for p in runs_dir.iterdir() if (p / "capsule.yaml").is_file()]
    record = (first / "capsule.yaml").read_text()
    stem = first.name[:-4]
    for i in range(1, runs):
        run_id = f"{stem}{i:04x}"
        if run_id == first.name:
            continue
        (runs_dir / run_id).mkdir()
        (runs_dir / run_id / "capsule.yaml").write_text(record.replace(first.name, run_id))


def _startup(repro: str, env: dict[str, str], repeats: int) -> list[Row]:
    """`repro --help` and `repro ls` in a project with one run, each against `python -c pass`."""
    peer = "bare `python -c pass`"
    with scratch("repro-bench-startup-") as proj:
        (proj / "repro.yaml").write_text("# benchmark project: no data, no dependencies\n")
        (proj / "requirements.in").write_text("")
        (proj / "train.py").write_text(TRAIN)
        run_timed([repro, "run", "--backend", "local", "--", "python", "train.py"], cwd=proj, env=env)
        bare = ["python", "-c", "pass"]
        py, helps, py2, lss = interleaved(
            max(11, repeats),
            [
                lambda: run_timed(bare, cwd=proj, env=env),
                lambda: run_timed([repro, "--help"], cwd=proj, env=env),
                lambda: run_timed(bare, cwd=proj, env=env),
                lambda: run_timed([repro, "ls"], cwd=proj, env=env),
            ],
        )
    note = "medians of interleaved runs: the fixed cost of every command (imports), before its work"
    return [
        Row(HELP_CASE, peer, py, helps, "< +0.15 s", "overhead", 0.15, note=note),
        Row(LS_CASE, peer, py2, lss, "< +0.25 s", "overhead", 0.25, note=note),
    ]


def run(repeats: int = 3) -> list[Row]:
    runs = int(os.environ.get("REPRO_BENCH_LS_RUNS", "100"))
    files = int(os.environ.get("REPRO_BENCH_LS_FILES", "20000"))
    repro = repro_exe()
    case_gone = f"repro ls, index gone, {runs} runs of {files:,} untracked files"
    case_garbage = f"repro ls, index garbage, {runs} runs of {files:,} untracked files"
    peer = "bare `python -c pass`"
    if repro is None or shutil.which("git") is None:
        why = "the repro command is not installed (make install)" if repro is None else "git is not installed"
        return [
            Row(HELP_CASE, peer, None, None, "< +0.15 s", "overhead", 0.15, skipped=why),
            Row(LS_CASE, peer, None, None, "< +0.25 s", "overhead", 0.25, skipped=why),
            Row(case_gone, peer, None, None, "< +2 s", "overhead", 2.0, skipped=why),
            Row(case_garbage, peer, None, None, "< +2 s", "overhead", 2.0, skipped=why),
        ]
    env = repro_env()
    startup = _startup(repro, env, repeats)
    with scratch("repro-bench-ls-") as proj:
        _make_runs(proj, repro, env, runs, files)
        index = proj / ".repro" / "index.sqlite"
        gone = f"rm -f {index} && {repro} ls"
        garbage = f"printf 'not a database' > {index} && {repro} ls"
        py, ours_gone, py2, ours_garbage = [], [], [], []
        for _ in range(repeats):
            py.append(run_timed(["python", "-c", "pass"], cwd=proj, env=env))
            ours_gone.append(run_timed(gone, cwd=proj, env=env))
            py2.append(run_timed(["python", "-c", "pass"], cwd=proj, env=env))
            ours_garbage.append(run_timed(garbage, cwd=proj, env=env))
        size = max(p.stat().st_size for p in (proj / ".repro" / "runs").glob("*/capsule.yaml"))
    note = f"medians of interleaved runs; each capsule.yaml {size / 1024:.0f} KiB, its file lists blobs"
    return [
        *startup,
        Row(case_gone, peer, median_sample(py), median_sample(ours_gone), "< +2 s", "overhead", 2.0,
            note=note),
        Row(case_garbage, peer, median_sample(py2), median_sample(ours_garbage), "< +2 s", "overhead", 2.0,
            note=note),
    ]  # fmt: skip


if __name__ == "__main__":
    print_rows(run(int(os.environ.get("REPRO_BENCH_REPEATS", "3"))))
