"""100,000 small files (1–16 KiB): first hash against stat + `xxh128sum` of every file,
and an unchanged re-check against `dvc status` on the same tree.

    python benchmarks/bench_hash_small.py               # 100,000 files (REPRO_BENCH_SMALL_N)
    python benchmarks/bench_hash_small.py --files 5000  # a smaller tree, a smoke test

dvc is installed with pip into .bench/venv (gitignored) on first use; `dvc add` of
100,000 files takes a couple of minutes of set-up, which is not timed.
"""

from __future__ import annotations

import argparse
import compileall
import os
import random
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PY, Row, Sample, ensure_dvc, ensure_xxh128sum, log, print_rows, run_timed, scratch

HERE = Path(__file__).resolve().parent
CLI = str(HERE / "_hash_tree_cli.py")


def generate(root: Path, n: int, seed: int = 0) -> int:
    """`n` files of 1–16 KiB, 1,000 per directory; returns the total bytes."""
    rng = random.Random(seed)
    blob = os.urandom(8 << 20)
    total = 0
    for i in range(n):
        d = root / f"{i // 1000:04d}"
        if i % 1000 == 0:
            d.mkdir(parents=True, exist_ok=True)
        size = rng.randint(1024, 16384)
        off = rng.randrange(0, len(blob) - size)
        (d / f"{i:07d}.bin").write_bytes(blob[off : off + size])
        total += size
    return total


def _dvc_env() -> dict[str, str]:
    return {**os.environ, "DVC_NO_ANALYTICS": "1", "DVC_NO_UPDATER": "1"}


def _dvc_setup(dvc: Path, proj: Path) -> bool:
    env = _dvc_env()
    try:
        for args in (
            ["init", "--no-scm", "-q"],
            ["config", "core.analytics", "false"],
            ["config", "core.check_update", "false"],
        ):
            subprocess.run([str(dvc), *args], cwd=proj, env=env, check=True, capture_output=True)
        log("dvc add data (set-up, not timed)")
        subprocess.run([str(dvc), "add", "-q", "data"], cwd=proj, env=env, check=True, capture_output=True)
    except subprocess.CalledProcessError as e:
        log(f"dvc set-up failed: {e.stderr.decode(errors='replace')[-500:]}")
        return False
    return True


def run(repeats: int = 3) -> list[Row]:
    """Rows for the first hash and for the unchanged re-check."""
    n = int(os.environ.get("REPRO_BENCH_SMALL_N", "100000"))
    xxh = ensure_xxh128sum()
    # repro runs as an installed package does: with its bytecode compiled (pip does that on
    # install), not recompiled from source by every new process where PYTHONDONTWRITEBYTECODE is set.
    compileall.compile_dir(str(HERE.parent / "repro"), quiet=1)
    rows: list[Row] = []
    with scratch("repro-bench-small-") as tmp:
        proj = tmp / "proj"
        data = proj / "data"
        log(f"generating {n:,} files of 1-16 KiB")
        total = generate(data, n)
        db = tmp / "hashes.sqlite"
        case_first = f"first hash, {n:,} files, {total / 2**20:.0f} MiB"

        if xxh is None:
            rows.append(
                Row(
                    case_first,
                    "stat + xxh128sum",
                    None,
                    None,
                    "<= 1.2x",
                    "within",
                    1.2,
                    skipped="xxh128sum not found and could not be installed",
                )
            )
        else:
            stat_cmd = "find data -type f -print0 | xargs -0 stat -c '%s %Y %i %Z' > /dev/null"
            sum_cmd = f"find data -type f -print0 | xargs -0 {xxh} > /dev/null"
            peer, ours = Sample(), Sample()
            log("timing the first hash (page cache warm)")
            for _ in range(repeats):
                w1, c1 = run_timed(stat_cmd, cwd=proj)
                w2, c2 = run_timed(sum_cmd, cwd=proj)
                peer.add(w1 + w2, c1 + c2)
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{db}{suffix}").unlink(missing_ok=True)
                ours.add(*run_timed([PY, CLI, str(data), str(db)]))
            rows.append(
                Row(
                    case_first,
                    "stat + xxh128sum",
                    peer,
                    ours,
                    "<= 1.2x",
                    "within",
                    1.2,
                    note="repro as a new process, writing its stat cache",
                )
            )

        case_re = f"unchanged re-check, {n:,} files"
        if not db.exists():
            run_timed([PY, CLI, str(data), str(db)])
        dvc = ensure_dvc()
        if dvc is None or not _dvc_setup(dvc, proj):
            rows.append(
                Row(
                    case_re,
                    "dvc status",
                    None,
                    None,
                    ">= 10x",
                    "speedup",
                    10.0,
                    skipped="dvc could not be installed or set up",
                )
            )
            return rows
        peer, ours = Sample(), Sample()
        log("timing the unchanged re-check")
        run_timed([str(dvc), "status", "-q"], cwd=proj, env=_dvc_env())  # warm both, untimed
        run_timed([PY, CLI, str(data), str(db)])
        for _ in range(repeats):
            peer.add(*run_timed([str(dvc), "status", "-q"], cwd=proj, env=_dvc_env()))
            ours.add(*run_timed([PY, CLI, str(data), str(db)]))
        version = subprocess.run([str(dvc), "--version"], capture_output=True, text=True).stdout.strip()
        rows.append(
            Row(
                case_re,
                f"dvc status ({version})",
                peer,
                ours,
                ">= 10x",
                "speedup",
                10.0,
                note="both as new processes, each with its own state/stat cache",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--files", type=int, help="files in the tree (default 100000, or REPRO_BENCH_SMALL_N)"
    )
    parser.add_argument("--repeats", type=int, default=int(os.environ.get("REPRO_BENCH_REPEATS", "3")))
    args = parser.parse_args()
    if args.files:
        os.environ["REPRO_BENCH_SMALL_N"] = str(args.files)
    print_rows(run(args.repeats))


if __name__ == "__main__":
    main()
