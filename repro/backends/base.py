"""The Backend protocol: what the runner hands a backend and what it gets back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class Event:
    """A progress event a backend reports: build output, a log line, a notice.

    kind: "build" (image build step/line), "log" (a line of the command's output;
    stream is "stdout" or "stderr"), "info" (a one-line notice).
    """

    kind: str
    text: str
    stream: str | None = None


OnEvent = Callable[[Event], None]


@dataclass
class RunSpec:
    """Everything a backend needs to execute one run.

    Paths in ``env`` are never host paths: each backend adds the path-dependent
    variables itself (PYTHONPATH for the injected runtime, REPRO_RUNTIME_DIR,
    REPRO_PROJECT_ROOT), because the host and the container see different paths.
    """

    argv: list[str]  # the user's command, e.g. ["python", "train.py", "--lr", "0.1"]
    project_root: Path  # host directory holding the code (the project, or a restored copy)
    workdir: str  # working directory relative to project_root ("." at the root)
    env: dict[str, str]  # seeds, mode knobs, REPRO_* settings; path-free
    runtime_dir: Path  # host dir, writable: the injected runtime writes metrics/env/opened files here
    stdout_path: Path  # host file the command's stdout is written to
    stderr_path: Path
    data: list[str] = field(default_factory=list)  # relative data paths (read-only)
    data_root: Path | None = None  # host dir the data paths are relative to (default project_root)
    outputs: list[str] = field(default_factory=list)  # relative output dirs (writable)
    nproc_per_node: int = 1  # >1: launched through `torchrun --standalone`
    network: bool = False
    gpus: str | None = None  # None, "all" or a count
    lockfile: Path | None = None  # hash-pinned requirements for image builds
    base_image: str | None = None  # tag or id; docker resolves and records it
    shm_size: str = "2g"
    store_dir: Path | None = None  # the store recording the run (labels its containers for `repro gc`)


@dataclass
class RunResult:
    """What a backend reports after the command ended."""

    exit_code: int
    duration_s: float
    interrupted: bool = False
    details: dict[str, Any] = field(default_factory=dict)  # e.g. container id, image id
    image: dict[str, Any] | None = None  # ImageInfo fields for the record (docker)
    written: list[str] = field(default_factory=list)  # files the backend saw the command write


class Backend(Protocol):
    """Where a command executes: the current machine, or a container."""

    name: str

    def prepare(self, spec: RunSpec, on_event: OnEvent) -> dict[str, Any] | None:
        """Get ready to run (build or reuse an image). Returns ImageInfo fields or None.

        Raises:
            BackendUnavailable: the backend cannot run here (no engine, no GPU).
            BuildError: the environment could not be built.
        """
        ...

    def execute(self, spec: RunSpec, on_event: OnEvent) -> RunResult:
        """Run the command to completion, streaming its output lines as "log" events.

        Ctrl-C stops what the backend started and returns a result with
        ``interrupted=True`` (exit code 130), so the run is still sealed.

        Raises:
            BackendUnavailable: the backend went away.
        """
        ...


# --------------------------------------------------------------------------- shared helpers

RUNTIME_ENV_DIR = "REPRO_RUNTIME_DIR"  # where the injected runtime writes its files
PROJECT_ENV = "REPRO_PROJECT_ROOT"  # the project root as the process sees it


def runtime_source() -> tuple[Path, Path]:
    """Host paths of (the sitecustomize directory, the directory holding the `repro` package).

    Both go on the process's PYTHONPATH: the first injects seeding and determinism,
    the second makes the optional ``import repro`` API importable (stdlib-only at import).
    """
    package = Path(__file__).resolve().parent.parent
    return package / "runtime" / "inject", package.parent


RANK_LOGS = "ranks"  # under the runtime dir: torchrun's per-rank stdout/stderr files


def launch_argv(
    argv: list[str], nproc_per_node: int, python: str = "python", log_dir: str | None = None
) -> list[str]:
    """The argv to execute: the command itself, or torchrun around it for N>1 processes.

    ``argv`` starts with a python interpreter (the runner normalises `train.py` to
    `python train.py`); under torchrun the interpreter is dropped and the script and
    its arguments follow torchrun's options. The ranks meet on the loopback address
    (``--local-addr``): a single node needs no name lookup, and a container without a
    network cannot resolve its own hostname. With ``log_dir`` (a path as the process
    sees it) every rank's stdout and stderr also go to their own files there
    (``<log_dir>/<run>/attempt_<n>/<rank>/std{out,err}.log``) while the combined,
    rank-prefixed stream still reaches the terminal.
    """
    if nproc_per_node <= 1:
        return list(argv)
    rest = argv[1:] if argv and Path(argv[0]).name.startswith("python") else argv
    launcher = [
        python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc_per_node}",
        "--local-addr=127.0.0.1",
    ]  # fmt: skip
    if log_dir:
        launcher += [f"--log-dir={log_dir}", "--redirects=3", "--tee=3"]
    return [*launcher, *rest]


def merge_pythonpath(argv: list[str], runtime_path: str) -> list[str]:
    """Keep the runtime loadable when the command sets PYTHONPATH itself through ``env``.

    ``env PYTHONPATH=. python train.py`` would replace the PYTHONPATH that carries the
    runtime; the runtime's entries are put in front of the command's own.
    """
    if not argv or Path(argv[0]).name != "env":
        return list(argv)
    merged = [argv[0]]
    for i, arg in enumerate(argv[1:], 1):
        if arg.startswith("PYTHONPATH="):
            own = arg.partition("=")[2]
            arg = "PYTHONPATH=" + ":".join(p for p in (runtime_path, own) if p)
        elif "=" not in arg and not arg.startswith("-"):
            return merged + argv[i:]  # the command env runs
        merged.append(arg)
    return merged
