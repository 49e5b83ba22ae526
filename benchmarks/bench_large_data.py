"""`repro run` over a large unchanged data tree, against the same run without data; `repro show`.

    python benchmarks/bench_large_data.py

REPRO_BENCH_SMALL_N files (default 100,000) of 64 bytes under data/, declared with --data;
the peer is the same command in a project without the data.
The first run hashes them (untimed); the timed runs find them unchanged. The record keeps
the manifest as a blob, so `repro show` reads a small record whatever the tree's size.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, Sample, log, print_rows, repro_env, repro_exe, run_timed, scratch

COMMAND = ["python", "-c", "pass"]


def _make_tree(root: Path, n: int) -> None:
    for i in range(n):
        d = root / f"d{i // 1000:03d}"
        if i % 1000 == 0:
            d.mkdir(parents=True)
        (d / f"f{i:06d}.bin").write_bytes(i.to_bytes(8, "little") * 8)


def run(repeats: int = 3) -> list[Row]:
    """Rows: run overhead with the data over the run without it; `repro show` of that run."""
    repro = repro_exe()
    n = int(os.environ.get("REPRO_BENCH_SMALL_N", "100000"))
    case_run, case_show = f"repro run, {n:,} unchanged data files", "repro show of that run"
    if repro is None:
        why = "the repro command is not installed (make install)"
        return [
            Row(case_run, "the same run without data", None, None, "< 1.5 s", "overhead", 1.5, skipped=why),
            Row(case_show, "bare `python -c pass`", None, None, "< 1 s", "overhead", 1.0, skipped=why),
        ]
    env = repro_env()
    with scratch("repro-bench-data-") as base:
        plain_proj, proj = base / "no-data", base / "data"
        for p in (plain_proj, proj):
            p.mkdir()
            (p / "repro.yaml").write_text("# benchmark project: no dependencies\n")
            (p / "requirements.in").write_text("")
        log(f"writing {n:,} data files")
        _make_tree(proj / "data", n)
        plain = [repro, "run", "--backend", "local", "--", *COMMAND]
        with_data = [repro, "run", "--backend", "local", "--data", "data", "--", *COMMAND]
        log("first runs: lockfile and the data's first hash (untimed)")
        run_timed(plain, cwd=plain_proj, env=env)
        run_timed(with_data, cwd=proj, env=env)
        bare, ours, bare_py, show = Sample(), Sample(), Sample(), Sample()
        for _ in range(repeats):
            bare.add(*run_timed(plain, cwd=plain_proj, env=env))
            ours.add(*run_timed(with_data, cwd=proj, env=env))
            bare_py.add(*run_timed(COMMAND, cwd=proj, env=env))
            show.add(*run_timed([repro, "show", "latest"], cwd=proj, env=env))
        size = max((p.stat().st_size for p in (proj / ".repro" / "runs").glob("*/capsule.yaml")), default=0)
    return [
        Row(case_run, "the same run without data", bare, ours, "< 1.5 s", "overhead", 1.5,
            note=f"re-check of unchanged files plus recording; capsule.yaml {size / 1024:.0f} KiB"),
        Row(case_show, "bare `python -c pass`", bare_py, show, "< 1 s", "overhead", 1.0,
            note="the manifest is a blob: the record holds its digest and count"),
    ]  # fmt: skip


if __name__ == "__main__":
    print_rows(run(int(os.environ.get("REPRO_BENCH_REPEATS", "3"))))
