"""Running repro on this machine for the checks: the machine's own Python and torch, repro from this
tree, repro's runtime dependencies from wheels carried in ``.whl/`` (no index, no network), the
local backend, each claim in a throw-away git project (benchmarks/gpu_mode.py makes them)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "tests" / "integration" / "scripts"  # the training scripts, shared with test_gpu_real.py
WHEELS = REPO / ".whl"
RUNTIME_LOCK = REPO / "lockfiles" / "runtime.lock.txt"
SKIP_WHEELS = {"pip", "setuptools"}  # the machine's own; a second copy on the path would shadow them
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


class OverBudget(Exception):
    """A command of a check ran past what is left of the check's time budget."""


def gpu_count() -> int:
    """The GPUs `nvidia-smi -L` lists (0 without nvidia-smi or a driver that answers)."""
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def runtime_pins(lock: Path = RUNTIME_LOCK) -> list[str]:
    """``name==version`` of repro's runtime dependencies, from its lock, less pip and setuptools."""
    pins = []
    for line in lock.read_text().splitlines():
        m = _PIN.match(line.strip())
        if m and m.group(1).lower() not in SKIP_WHEELS:
            pins.append(f"{m.group(1)}=={m.group(2)}")
    return pins


def install_wheels(site: Path, wheels: Path = WHEELS) -> str:
    """Install repro's runtime dependencies from ``wheels`` into ``site`` (pip, no index). Returns a
    line saying what was done.

    Raises:
        RuntimeError: no wheels and the dependencies are not importable here, or pip failed.
    """
    if not any(wheels.glob("*.whl")):
        missing = _missing_modules()
        if missing:
            raise RuntimeError(
                f"repro's dependencies are missing here ({', '.join(missing)}) and {wheels} holds "
                "no wheels: run `make gpu-wheels` where there is network, and carry .whl/"
            )
        return "no wheels carried; repro's dependencies are importable here"
    argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-index",
        "--no-deps",
        "--no-compile",
        "--disable-pip-version-check",
        "--upgrade",
        "--target",
        str(site),
        "--find-links",
        str(wheels),
        *runtime_pins(),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"pip could not install the carried wheels: {proc.stderr.strip()[-400:]}")
    return f"repro's runtime dependencies installed from {wheels.name}/ into {site}"


def _missing_modules() -> list[str]:
    names = "click yaml xxhash git piptools packaging docker safetensors pathspec pypi_simple cryptography"
    code = f"import importlib.util as u; print(' '.join(m for m in {names.split()!r} if not u.find_spec(m)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    return out.split()


@dataclass
class Deadline:
    """Seconds left of a time budget."""

    seconds: float
    started: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.started)


@dataclass
class Lab:
    """Where the checks run: the output folder, the site with repro's dependencies, the environment."""

    out: Path
    site: Path | None = None
    facts: dict[str, Any] = field(default_factory=dict)  # this machine's device, driver, CUDA, torch
    commands: list[str] = field(default_factory=list)  # what the current check ran, for its report row

    def env(self) -> dict[str, str]:
        paths = [str(p) for p in (self.site, REPO) if p is not None]
        old = os.environ.get("PYTHONPATH")
        return {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(paths + ([old] if old else [])),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "NO_COLOR": "1",
            "PYTHONUNBUFFERED": "1",
        }

    def project(self, name: str, files: dict[str, str]) -> Path:
        """A fresh git project under the output folder's work/ (benchmarks/gpu_mode.py makes it)."""
        from benchmarks.gpu_mode import project

        root = self.out / "work" / name
        shutil.rmtree(root, ignore_errors=True)
        project(root, files)
        return root

    def repro(self, cwd: Path, args: list[str], deadline: Deadline) -> subprocess.CompletedProcess[str]:
        """`repro ARGS` in ``cwd`` (recorded for the report).

        Raises:
            OverBudget: it ran past what is left of the check's budget.
        """
        self.commands.append("repro " + " ".join(args))
        left = deadline.left()
        if left <= 1:
            raise OverBudget(f"no time left for `repro {' '.join(args[:2])}`")
        argv = [sys.executable, "-m", "repro", *args]
        # Its own process group: past the budget, the training processes under it end with it.
        proc = subprocess.Popen(argv, cwd=cwd, env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)  # fmt: skip
        try:
            out, err = proc.communicate(timeout=left)
        except subprocess.TimeoutExpired as e:
            _end_group(proc)
            raise OverBudget(f"`repro {' '.join(args[:2])}` ran past the check's budget") from e
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def repro_json(self, cwd: Path, args: list[str], deadline: Deadline) -> dict[str, Any]:
        """`repro ARGS --json`'s answer (``{}`` plus ``_exit``/``_stderr`` when it printed none)."""
        proc = self.repro(cwd, args, deadline)
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError:
            doc = {}
        doc = doc if isinstance(doc, dict) else {}
        doc["_exit"], doc["_stderr"] = proc.returncode, proc.stderr[-2000:]
        return doc


def _end_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to the process group this check started, SIGKILL if it is still there 10 s later."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.communicate(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue


def last_line(text: str) -> str:
    """The last non-blank line of a command's stderr (its error, as repro prints it), cut at 300 chars."""
    lines = [s for s in text.strip().splitlines() if s.strip()]
    return lines[-1][:300] if lines else "(no message)"


def script(name: str) -> str:
    """A shared training script's text (tests/integration/scripts/)."""
    return (SCRIPTS / name).read_text()


def machine_facts(gpus: int) -> dict[str, Any]:
    """Device, driver, CUDA and torch as this machine's Python and nvidia-smi report them."""
    code = (
        "import json, sys, torch; c = torch.cuda.is_available(); "
        "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, 'cuda_available': c, "
        "'device': torch.cuda.get_device_name(0) if c else None, 'python': sys.version.split()[0]}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    facts: dict[str, Any] = {"gpu_count": gpus, "python": sys.version.split()[0]}
    try:
        facts.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    except (json.JSONDecodeError, IndexError):
        facts.update({"torch": None, "cuda_available": False, "torch_error": proc.stderr.strip()[-300:]})
    try:
        q = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        facts["driver"] = (
            subprocess.run(q, capture_output=True, text=True, timeout=30).stdout.split("\n")[0].strip()
        )
    except (OSError, subprocess.SubprocessError):
        facts["driver"] = None
    from repro import __version__

    facts["repro"] = f"{__version__} (this tree, {_head()})"
    return facts


def _head() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    return out or "commit unknown"
