"""Run every benchmark, print the tables, and record them in benchmarks/RESULTS.md.

    python benchmarks/run_all.py              # full sizes (a few minutes), writes RESULTS.md
    python benchmarks/run_all.py --quick      # small sizes, a smoke test; RESULTS.md untouched
    python benchmarks/run_all.py --only small # one of: big, small, run, data, threads, seal, reads,
                                              # ls, project, ops, save, trace, budget, compile, prove,
                                              # record;
                                              # the other suites' sections of RESULTS.md are kept

Sizes: REPRO_BENCH_BIG_MB (2048), REPRO_BENCH_SMALL_N (100000), REPRO_BENCH_OUTPUTS (5000),
REPRO_BENCH_LS_RUNS (100), REPRO_BENCH_LS_FILES (20000), REPRO_BENCH_PROJECT_FILES (50000),
REPRO_BENCH_REPEATS.
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

import bench_big_project  # noqa: E402
import bench_compile  # noqa: E402
import bench_dataloader_reads  # noqa: E402
import bench_hash_big  # noqa: E402
import bench_hash_small  # noqa: E402
import bench_large_data  # noqa: E402
import bench_ls_noindex  # noqa: E402
import bench_ops  # noqa: E402
import bench_prove  # noqa: E402
import bench_registry  # noqa: E402
import bench_run_overhead  # noqa: E402
import bench_seal_export  # noqa: E402
import bench_state_record  # noqa: E402
import bench_store_budget  # noqa: E402
import bench_strict_threads  # noqa: E402
import bench_torch_save  # noqa: E402
import bench_trace  # noqa: E402
from _common import INFO, PY, Row, log, machine, md_table, table, text_table, tool_version  # noqa: E402

SUITES = {
    "big": ("Big files, page cache warm: throughput vs xxh128sum", bench_hash_big.run, 5),
    "small": ("Small files (1-16 KiB): first hash and unchanged re-check", bench_hash_small.run, 3),
    "run": ("`repro run` overhead over the bare command", bench_run_overhead.run, 5),
    "data": ("`repro run` over 100k unchanged data files, and `repro show`", bench_large_data.run, 3),
    "threads": ("Strict mode at 1, 2 and all cores: bit-stability and cost", bench_strict_threads.run, 6),
    "seal": ("Sealing and exporting a run with thousands of outputs", bench_seal_export.run, 7),
    "reads": ("Small declared files read by DataLoader workers and by open()", bench_dataloader_reads.run, 7),
    "ls": ("Start-up; `repro ls`, index gone: 100 runs of 20k untracked files", bench_ls_noindex.run, 3),
    "project": ("A project of 50k files outside git: `repro run` and `repro show`", bench_big_project.run, 3),
    "ops": ("`repro replay --ops` against the plain replay of the same run", bench_ops.run, 3),
    "save": ("Checkpoint saves of 1 GiB inside a run: torch.save, safetensors", bench_torch_save.run, 5),
    "trace": ("`--trace` per optimizer step: MLP, CNN, 100M parameters", bench_trace.run, 5),
    "budget": ("The store's budget: traced runs' checkpoint copies", bench_store_budget.run, 3),
    "compile": ("A first torch.compile under `repro run` against `docker run`", bench_compile.run, 3),
    "registry": ("`repro push`/`pull` on a loopback registry vs a plain tar upload", bench_registry.run, 3),
    "prove": ("`repro diff --prove` against one bare run per factor", bench_prove.run, 1),
    "record": (
        "The per-step state record of `check --interrupt`: HF Trainer, Lightning",
        bench_state_record.run,
        5,
    ),
}
SUITE_TITLES = [title for title, _, _ in SUITES.values()]


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
    return [f"- {r.case}: {said}" for r in rows if (said := r.notes()) is not None]


def _kept_sections(path: Path, titles: set[str]) -> dict[str, str]:
    """Sections of an earlier RESULTS.md (title -> text) for suites not run this time."""
    if not path.exists():
        return {}
    text = path.read_text()
    # A file written before sections carried their own stamp has one "Run:" line for all.
    legacy = next((line[5:] for line in text.splitlines() if line.startswith("Run: ")), None)
    kept: dict[str, str] = {}
    for chunk in text.split("\n## ")[1:]:
        title, _, body = chunk.partition("\n")
        if title not in ("Machine", "Targets") and title not in titles:
            body = body.strip("\n")
            stamped = any(line.startswith(("Run:", "_Run:")) for line in body.splitlines())
            if legacy and not stamped:
                body = f"_Run: {legacy}._\n\n{body}"
            kept[title] = body
    return kept


def _earlier_versions(path: Path) -> dict[str, str]:
    """The ``- tool: version`` lines of an earlier RESULTS.md's Machine section."""
    if not path.exists():
        return {}
    section = path.read_text().partition("\n## Machine\n")[2].partition("\n## ")[0]
    pairs = (line[2:].partition(": ") for line in section.splitlines() if line.startswith("- "))
    return {k: v for k, _, v in pairs if v and v not in ("?", "not installed")}


def _write_results(results: list[tuple[str, list[Row]]], started: str, host: dict[str, str]) -> Path:
    path = HERE / "RESULTS.md"
    kept = _kept_sections(path, {title for title, _ in results})
    earlier = _earlier_versions(path)  # a peer absent this time keeps the version its rows were run with
    versions = {k: earlier.get(k, v) if v in ("?", "not installed") else v for k, v in _versions().items()}
    lines = [
        "# Benchmark results",
        "",
        "Written by `make bench` (`python benchmarks/run_all.py`). Every row compares repro with a named",
        "peer on the same generated data in the same run; ratios, not absolute times, are the claim.",
        "Times are the best of the repeats; `cpu` is user+system CPU seconds (of the process and its",
        "children), which is steadier than wall-clock time on a shared machine. Each section names",
        "the run it comes from and its CPU (`run_all.py --only` rewrites only its own sections; the",
        "Machine section describes the latest run's machine).",
        "",
        "## Machine",
        "",
        *[f"- {k}: {v}" for k, v in host.items() if k != "load average at start"],
        *[f"- {k}: {v}" for k, v in versions.items()],
        "",
    ]
    load = host.get("load average at start", "?")
    cpu = host.get("cpu", "?")  # a kept section may come from another machine: each names its CPU
    stamp = f"_Run: {started}, repro {versions['repro']}, {cpu}, load average at start {load}._"
    for title in dict.fromkeys([*SUITE_TITLES, *kept]):
        rows = next((r for t, r in results if t == title), None)
        if rows is not None:
            lines += [f"## {title}", "", stamp, "", md_table(table(rows)), "", *_notes(rows), ""]
        elif title in kept:
            lines += [f"## {title}", "", kept[title], ""]
    lines += ["## Targets", "", *_closing(results, kept), ""]
    path.write_text("\n".join(lines))
    return path


def _verdicts(body: str) -> list[tuple[str, str]]:
    """(case, verdict) of each row of the tables in a kept section."""
    out = []
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| ") and len(cells) >= 3 and cells[-1] in ("met", "NOT met", "skipped"):
            out.append((cells[0], cells[-1]))
    return out


def _closing(results: list[tuple[str, list[Row]]], kept: dict[str, str]) -> list[str]:
    """The closing note: which targets are met and which are not, over every section."""
    verdicts = [(r.case, "met" if r.met() else "NOT met" if r.met() is False else "skipped")
                for _, rs in results for r in rs if r.target != INFO]  # fmt: skip
    for body in kept.values():
        verdicts += _verdicts(body)
    out = []
    for label, verdict in (("met", "met"), ("not met", "NOT met"), ("skipped", "skipped")):
        cases = [case for case, v in verdicts if v == verdict]
        if cases or verdict != "skipped":
            out.append(f"- {label} ({len(cases)}): " + ("; ".join(cases) or "none"))
    return out


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
        os.environ.setdefault("REPRO_BENCH_THREADS_STEPS", "10")
        os.environ.setdefault("REPRO_BENCH_PROVE_STEPS", "30")
        os.environ.setdefault("REPRO_BENCH_PROVE_FACTORS", "2")
        os.environ.setdefault("REPRO_BENCH_LS_RUNS", "10")
        os.environ.setdefault("REPRO_BENCH_LS_FILES", "2000")
        os.environ.setdefault("REPRO_BENCH_PROJECT_FILES", "3000")
        os.environ.setdefault("REPRO_BENCH_OPS_STEPS", "20")
        os.environ.setdefault("REPRO_BENCH_SAVE_MB", "128")
        os.environ.setdefault("REPRO_BENCH_TRACE_BIG", "10000000")
        os.environ.setdefault("REPRO_BENCH_CKPT_MB", "8")
        os.environ.setdefault("REPRO_BENCH_RECORD_EPOCHS", "3")
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
    for line in _closing(results, {}):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
