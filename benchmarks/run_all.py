"""Run every benchmark, print the tables, and record them in benchmarks/RESULTS.md.

    python benchmarks/run_all.py              # full sizes (a few minutes), writes RESULTS.md
    python benchmarks/run_all.py --quick      # small sizes, a smoke test; RESULTS.md untouched
    python benchmarks/run_all.py --only small # one of: big, small, run, data

Sizes: REPRO_BENCH_BIG_MB (2048), REPRO_BENCH_SMALL_N (100000), REPRO_BENCH_REPEATS.
Scratch data goes under REPRO_BENCH_DIR (default: the system temp dir) and is removed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_hash_big  # noqa: E402
import bench_hash_small  # noqa: E402
import bench_large_data  # noqa: E402
import bench_run_overhead  # noqa: E402
from _common import PY, Row, log, machine, md_table, table, text_table, tool_version  # noqa: E402

SUITES = {
    "big": ("Big files, page cache warm: throughput vs xxh128sum", bench_hash_big.run, 5),
    "small": ("Small files (1-16 KiB): first hash and unchanged re-check", bench_hash_small.run, 3),
    "run": ("`repro run` overhead over the bare command", bench_run_overhead.run, 5),
    "data": ("`repro run` over 100k unchanged data files, and `repro show`", bench_large_data.run, 3),
}


def _versions() -> dict[str, str]:
    dvc = HERE.parent / ".bench" / "venv" / "bin" / "dvc"
    return {
        "xxh128sum": tool_version(["xxh128sum", "--version"]),
        "dvc": tool_version([str(dvc), "--version"]) if dvc.exists() else "not installed",
        "python-xxhash": tool_version([PY, "-c", "import xxhash; print(xxhash.VERSION)"]),
        "docker": tool_version(["docker", "version", "--format", "{{.Server.Version}}"]),
        "repro": subprocess.run(
            ["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        or "?",
    }


def _notes(rows: list[Row]) -> list[str]:
    out = []
    for r in rows:
        if r.skipped:
            out.append(f"- {r.case}: skipped — {r.skipped}")
        elif r.note:
            out.append(f"- {r.case}: {r.note}")
    return out


def _write_results(results: list[tuple[str, list[Row]]], started: str, host: dict[str, str]) -> Path:
    versions = _versions()
    lines = [
        "# Benchmark results",
        "",
        "Written by `make bench` (`python benchmarks/run_all.py`). Every row compares repro with a named",
        "peer on the same generated data in the same run; ratios, not absolute times, are the claim.",
        "Times are the best of the repeats; `cpu` is user+system CPU seconds (of the process and its",
        "children), which is steadier than wall-clock time on a shared machine.",
        "",
        f"Run: {started}",
        "",
        "## Machine",
        "",
        *[f"- {k}: {v}" for k, v in host.items()],
        *[f"- {k}: {v}" for k, v in versions.items()],
        "",
    ]
    for title, rows in results:
        lines += [f"## {title}", "", md_table(table(rows)), "", *_notes(rows), ""]
    path = HERE / "RESULTS.md"
    path.write_text("\n".join(lines))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes; do not write RESULTS.md")
    parser.add_argument("--only", choices=sorted(SUITES), action="append", help="run only these suites")
    parser.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args()
    if args.quick:
        os.environ.setdefault("REPRO_BENCH_BIG_MB", "256")
        os.environ.setdefault("REPRO_BENCH_SMALL_N", "5000")
        os.environ.setdefault("REPRO_BENCH_REPEATS", "2")
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    host = machine()
    results: list[tuple[str, list[Row]]] = []
    for name in args.only or list(SUITES):
        title, fn, repeats = SUITES[name]
        log(title)
        rows = fn(int(os.environ.get("REPRO_BENCH_REPEATS", repeats)))
        results.append((title, rows))
        print(f"\n{title}\n")
        print(text_table(table(rows)))
        for line in _notes(rows):
            print("  " + line)
    print()
    if not (args.quick or args.no_write):
        print(f"results written to {_write_results(results, started, host).relative_to(HERE.parent)}")
    missed = [r.case for _, rows in results for r in rows if r.met() is False and r.threshold]
    if missed:
        print("targets not met: " + "; ".join(missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
