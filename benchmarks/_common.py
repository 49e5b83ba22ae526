"""Shared helpers for the benchmarks: timing, peers' set-up, machine description, tables."""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH_ENV = REPO / ".bench"  # gitignored: peers' virtual environment
PY = sys.executable


@dataclass
class Sample:
    """Best wall-clock and best CPU seconds over the repeats."""

    wall: float = float("inf")
    cpu: float = float("inf")
    runs: list[float] = field(default_factory=list)

    def add(self, wall: float, cpu: float) -> None:
        self.runs.append(wall)
        self.wall = min(self.wall, wall)
        self.cpu = min(self.cpu, cpu)


def median_sample(runs: list[tuple[float, float]]) -> Sample:
    """The median wall and median CPU seconds of interleaved runs (steadier than the best on a shared
    machine); every wall time kept."""
    s = Sample()
    for wall, cpu in runs:
        s.add(wall, cpu)
    s.wall = statistics.median(w for w, _ in runs)
    s.cpu = statistics.median(c for _, c in runs)
    return s


INFO = "(info)"


def repro_exe() -> str | None:
    """The `repro` beside this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "repro"
    return str(beside) if beside.exists() else shutil.which("repro")


def repro_env() -> dict[str, str]:
    """The environment for timed commands: `python` is this interpreter both bare and under repro."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "NO_COLOR": "1"}


@dataclass
class Row:
    """One comparison: repro against a named peer on the same data."""

    case: str
    peer: str
    peer_s: Sample | None
    repro_s: Sample | None
    target: str  # e.g. ">= 1.0x" (higher ratio is better) — see `ratio`
    ratio_kind: str  # "speedup" (peer/repro), "within" (repro/peer) or "overhead" (repro - peer, seconds)
    threshold: float
    note: str = ""
    skipped: str | None = None
    judge_cpu: bool = False  # the verdict reads the CPU ratio (in-process timings on a loaded machine)
    unmet: str = ""  # where the target is not met: why, and what would meet it

    def notes(self) -> str | None:
        """The row's line under its table: why it was skipped, its note, why its target was not met."""
        if self.skipped:
            return f"skipped — {self.skipped}"
        parts = [self.note] if self.note else []
        if self.unmet and self.met() is False:
            parts.append(f"not met: {self.unmet}")
        return "; ".join(parts) or None

    def ratio(self, cpu: bool = False) -> float | None:
        if self.peer_s is None or self.repro_s is None:
            return None
        p, r = (self.peer_s.cpu, self.repro_s.cpu) if cpu else (self.peer_s.wall, self.repro_s.wall)
        if self.ratio_kind == "overhead":
            return r - p
        if self.ratio_kind == "speedup":
            return p / r if r else float("inf")
        return r / p if p else float("inf")

    def met(self) -> bool | None:
        ratio = self.ratio(cpu=self.judge_cpu)
        if ratio is None or self.target == INFO:
            return None
        if self.ratio_kind == "speedup":
            return ratio >= self.threshold
        return ratio < self.threshold if self.ratio_kind == "overhead" else ratio <= self.threshold


def log(text: str) -> None:
    """A progress line on stderr (results go to stdout)."""
    sys.stderr.write(f"[bench] {text}\n")
    sys.stderr.flush()


def run_timed(
    cmd: list[str] | str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[float, float]:
    """Run a command to completion; (wall seconds, CPU seconds of it and its children).

    Raises:
        RuntimeError: the command failed.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, shell=isinstance(cmd, str), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        shown = cmd if isinstance(cmd, str) else " ".join(cmd)
        raise RuntimeError(
            f"{shown!r} exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def timed_output(
    cmd: list[str], cwd: Path, env: dict[str, str] | None = None, codes: tuple[int, ...] = (0,)
) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the children, stdout) of one command that must exit with one of
    ``codes``; ``env`` is added to `repro_env`.

    Raises:
        RuntimeError: another exit status.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env={**repro_env(), **(env or {})}, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in codes:
        raise RuntimeError(f"{' '.join(cmd)!r} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.stdout


def recorded(
    repro: str, proj: Path, argv: list[str], flags: Sequence[str] = (), env: dict[str, str] | None = None
) -> str:
    """Record ``argv`` with `repro run --backend local` (and ``flags``) in ``proj``; its run id."""
    cmd = [repro, "run", "--backend", "local", *flags, "--", *argv]
    subprocess.run(cmd, cwd=proj, env={**repro_env(), **(env or {})}, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    shown = subprocess.run(
        [repro, "show", "latest", "--json"], cwd=proj, env=repro_env(), capture_output=True
    )
    return str(json.loads(shown.stdout)["id"])


def interleaved(repeats: int, measures: Sequence[Callable[[], tuple[float, float]]]) -> list[Sample]:
    """Each measure once per round, in turn (a, b, a, b …, so a load that comes and goes falls on
    all of them alike): the median `Sample` of each, in the order given."""
    taken: list[list[tuple[float, float]]] = [[] for _ in measures]
    for _ in range(repeats):
        for kept, measure in zip(taken, measures, strict=True):
            kept.append(measure())
    return [median_sample(kept) for kept in taken]


def time_inprocess(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process, all threads) of one call."""
    start, cpu0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu0


@contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A temporary directory under $REPRO_BENCH_DIR (default: the system temp dir), removed after."""
    base = os.environ.get("REPRO_BENCH_DIR")
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def ensure_xxh128sum() -> str | None:
    """The path of xxh128sum, installing Debian's `xxhash` package when missing and possible."""
    found = shutil.which("xxh128sum")
    if found or not shutil.which("apt-get") or os.geteuid() != 0:
        return found
    log("installing xxh128sum (apt-get install xxhash)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for args in (
        ["apt-get", "install", "-y", "-qq", "xxhash"],
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "xxhash"],
    ):
        subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if shutil.which("xxh128sum"):
            break
    return shutil.which("xxh128sum")


def ensure_dvc() -> Path | None:
    """The dvc executable of the benchmarks' own venv (.bench/venv), installed with pip when missing."""
    venv = BENCH_ENV / "venv"
    dvc = venv / "bin" / "dvc"
    if dvc.exists():
        return dvc
    log("installing dvc into .bench/venv (pip install dvc)")
    try:
        if not (venv / "bin" / "python").exists():
            subprocess.run([PY, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "dvc"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    except subprocess.CalledProcessError as e:
        log(f"could not install dvc: {e}")
        return None
    return dvc if dvc.exists() else None


def tool_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else "?"


def machine() -> dict[str, str]:
    """A short description of the machine the numbers come from."""
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    tmp = os.environ.get("REPRO_BENCH_DIR") or tempfile.gettempdir()
    fs = "?"
    try:
        out = subprocess.run(["df", "-T", tmp], capture_output=True, text=True).stdout.splitlines()
        fs = out[-1].split()[1] if len(out) > 1 else "?"
    except (OSError, IndexError):
        pass
    try:
        load = "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
    except OSError:
        load = "?"
    return {
        "cpu": f"{cpu}, {os.cpu_count()} cores",
        "memory": mem,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "scratch": f"{tmp} ({fs})",
        "load average at start": load,
    }


def fmt_s(s: Sample | None) -> str:
    if s is None or s.wall == float("inf"):
        return "—"
    return f"{s.wall:.3f} s (cpu {s.cpu:.3f})"


def fmt_ratio(row: Row) -> str:
    r = row.ratio()
    if r is None:
        return "skipped"
    rc = row.ratio(cpu=True)
    if row.ratio_kind == "overhead":
        return f"+{r:.3f} s (cpu +{rc:.3f} s)"
    label = "faster" if row.ratio_kind == "speedup" else "of peer"
    return f"{r:.2f}x {label} (cpu {rc:.2f}x)"


def table(rows: list[Row]) -> list[list[str]]:
    out = []
    for row in rows:
        met = row.met()
        if row.target == INFO:
            verdict = "info"
        else:
            verdict = "skipped" if met is None else ("met" if met else "NOT met")
        out.append(
            [row.case, row.peer, fmt_s(row.peer_s), fmt_s(row.repro_s), fmt_ratio(row), row.target, verdict]
        )
    return out


HEADERS = ["case", "peer", "peer (best)", "repro (best)", "ratio", "target", "verdict"]


def text_table(rows: list[list[str]], headers: list[str] = HEADERS) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def md_table(rows: list[list[str]], headers: list[str] = HEADERS) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines)


def print_rows(rows: list[Row]) -> None:
    """A suite's table on stdout, then one line per skipped row or note."""
    print(text_table(table(rows)))
    for r in rows:
        if (said := r.notes()) is not None:
            print(f"  {r.case}: {said}")
