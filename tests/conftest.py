"""Shared fixtures: real git projects in temp dirs, and running the CLI in-process."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

# A suite started in the background by a shell without job control (`make test &`, nohup) inherits SIGINT
# ignored, and so would every repro it starts: Ctrl-C would never reach them. The tests that press Ctrl-C
# need it delivered, as a terminal delivers it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# A pytest-xdist worker starts with COLUMNS=80 and LINES=24 in its environment, which no shell that runs
# `make test` sets: every repro and script a test starts would take them for the terminal's size.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)


def _pin_worker() -> None:
    """With more workers than CPUs (`make test` runs 4 on a 2-core machine), pin each worker, and every
    run it starts, to one CPU. A strict run's default thread count is the CPUs it may use: unpinned,
    each of 4 concurrent runs would take both cores and their OpenMP threads spin-wait on each other
    (measured here: 300 Adam steps of a small MLP 15-25x slower at 2 threads than at 1 under that load);
    pinned, a run's default is 1 and a test that asks for more threads gets OpenMP's throttled waits."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if worker.startswith("gw") and worker[2:].isdigit() and cpus and count > len(cpus):
        os.sched_setaffinity(0, {cpus[int(worker[2:]) % len(cpus)]})


_pin_worker()

SCRIPTS = Path(__file__).parent / "integration" / "scripts"
REPO = Path(__file__).resolve().parent.parent
QUICKSTART_LOCK = REPO / "recipes" / "quickstart" / "lockfiles" / "requirements.lock.txt"
QUICKSTART_REQUIREMENTS = (REPO / "recipes" / "quickstart" / "requirements.in").read_text()


@dataclass
class CliResult:
    code: int
    out: str
    err: str


class Cli(Protocol):
    """The `cli` fixture: run `repro ARGS…` in-process, in ``cwd``."""

    def __call__(self, *args: str, cwd: Path | None = None) -> CliResult: ...


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


class Project:
    """A temp project: a git repo with a script, data and (optionally) requirements."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def init(cls, root: Path) -> Project:
        """A new git repository at ``root`` (made, with its parents), on branch main."""
        root.mkdir(parents=True)
        git(root, "init", "-q", "-b", "main")
        return cls(root)

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def script(self, name: str, as_name: str | None = None) -> Path:
        dest = self.root / (as_name or name)
        shutil.copyfile(SCRIPTS / name, dest)
        return dest

    def commit(self, message: str = "work") -> str:
        git(self.root, "add", "-A")
        git(self.root, "commit", "-qm", message)
        return git(self.root, "rev-parse", "HEAD").strip()

    def points(self, rel: str = "data/points.csv", n: int = 96, seed: int = 3) -> Path:
        import random

        r = random.Random(seed)
        rows = [
            f"{r.gauss(c * 2 - 1, 0.7):.5f},{r.gauss(1 - c * 2, 0.7):.5f},{c}"
            for c in (i % 2 for i in range(n))
        ]
        return self.write(rel, "\n".join(rows) + "\n")

    def lock_torch(self) -> None:
        """Declare torch==2.13.0 and reuse the repository's committed lock for it (same inputs)."""
        self.write("requirements.in", QUICKSTART_REQUIREMENTS)
        (self.root / "lockfiles").mkdir(exist_ok=True)
        shutil.copyfile(QUICKSTART_LOCK, self.root / "lockfiles" / "requirements.lock.txt")

    def repro(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
              timeout: float = 600) -> CliResult:  # fmt: skip
        """Run the real `repro` command in a subprocess."""
        proc = subprocess.run(
            [sys.executable, "-m", "repro", *args], cwd=cwd or self.root, capture_output=True, text=True,
            env={**os.environ, "NO_COLOR": "1", **(env or {})}, timeout=timeout,
        )  # fmt: skip
        return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    p = Project.init(tmp_path / "proj")
    p.write(".gitignore", "outputs/\n")
    p.commit("init")
    return p


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Run `repro` in-process in a directory: returns exit code, stdout and stderr separately."""
    from repro.cli import main

    def invoke(*args: str, cwd: Path | None = None) -> CliResult:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    monkeypatch.setenv("NO_COLOR", "1")
    return invoke


# --------------------------------------------------------------------------- markers

_MISSING: dict[str, str | None] = {}


def _docker_missing() -> str | None:
    """Why docker-marked tests cannot run here, or None when an engine with the base image answers."""
    from repro.backends.docker.engine import engine, engine_available, find_image
    from repro.config import DEFAULT_BASE_IMAGE

    if not engine_available():
        return "no Docker engine answers (start one with `make docker-up` as root, or set DOCKER_HOST)"
    with engine() as client:
        if find_image(client, DEFAULT_BASE_IMAGE) is None:
            return f"the engine has no base image {DEFAULT_BASE_IMAGE} (make it with `make docker-up`)"
    return None


def _gpu_missing() -> str | None:
    """Why gpu-marked tests cannot run here, or None when this interpreter's torch sees a CUDA GPU."""
    if not shutil.which("nvidia-smi"):
        return "no NVIDIA GPU here (no nvidia-smi)"
    import torch

    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA GPU (a CPU build, or no driver)"
    return None


_CHECKS = {"docker": _docker_missing, "gpu": _gpu_missing}


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a docker- or gpu-marked test, with the reason, where the machine cannot run it."""
    for marker, check in _CHECKS.items():
        if item.get_closest_marker(marker) is None:
            continue
        if marker not in _MISSING:
            _MISSING[marker] = check()
        reason = _MISSING[marker]
        if reason:
            pytest.skip(reason)


# --------------------------------------------------------------------------- parallel runs

# `make test` runs the suite on several pytest-xdist workers, in work units this scheduler makes: a unit
# or process test is a unit of its own; a cli or integration module is one unit, so that its module-scoped
# fixtures (one real run shared by its tests) are made once, not once per worker; the modules named after
# Slurm are one unit together, since they share a two-node cluster whose queue and timing they assert on.
# Tests marked `serial` change what every other test uses (`repro gc --images` removes every image no run
# of its store references, engine-wide): `make test` runs them after the others, alone.
_BY_MODULE = ("tests/cli/", "tests/integration/")


def work_unit(nodeid: str) -> str:
    """The work unit a test belongs to in a parallel run (tests of one unit run on one worker, in order)."""
    path = nodeid.split("::", 1)[0]
    if not path.startswith(_BY_MODULE):
        return nodeid
    return "slurm" if "slurm" in path.rsplit("/", 1)[-1] else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    from xdist.scheduler import LoadScopeScheduling

    class WorkUnits(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return WorkUnits(config, log)
