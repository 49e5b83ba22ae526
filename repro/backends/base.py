"""The Backend protocol: what the runner hands a backend and what it gets back."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from repro.runtime import contract
from repro.runtime.launch import launch_argv as launch_argv  # the backends' name for it

# Opens a `docker save` archive of the recorded image (a capsule member) for reading.
OpenImage = Callable[[], AbstractContextManager[IO[bytes]]]


@dataclass(frozen=True)
class Event:
    """A progress event a backend reports: build output, the command's output, a notice.

    kind: "output" (bytes of the command's output as they came, in ``data``; stream is
    "stdout" or "stderr"), "stage" (a build stage begins: ``text`` names it, with its
    sizes), "stage-end" (it ended; ``text``, when given, names it with what is known
    now), "build" (one line of a build's or a lock compile's own output, for the full
    log), "build-log" (``text``: the file that full log is kept in), "info" (a notice).
    """

    kind: str
    text: str = ""
    stream: str | None = None
    data: bytes = b""


OnEvent = Callable[[Event], None]


@dataclass(frozen=True)
class Terminal:
    """Which of the command's streams end on a terminal, and its size: a backend gives those
    streams a pseudo-terminal, so the script sees a TTY where it would without repro."""

    stdout: bool = False
    stderr: bool = False
    columns: int = 0
    lines: int = 0

    @property
    def streams(self) -> list[str]:
        return [name for name in ("stdout", "stderr") if getattr(self, name)]

    def details(self) -> dict[str, str]:
        """What a run's record keeps of it (``backend.details``), so a replay gives the command the same."""
        if not self.streams:
            return {}
        return {"terminal": ",".join(self.streams), "terminal_size": f"{self.columns}x{self.lines}"}

    @classmethod
    def recorded(cls, details: dict[str, Any]) -> Terminal:
        """The terminal a recorded run's command had (none for a record without one); sizes kept sane,
        since a capsule is untrusted input."""
        names = str(details.get("terminal") or "").split(",")
        wide, _, high = str(details.get("terminal_size") or "").partition("x")
        size = (int(wide), int(high)) if wide.isdigit() and high.isdigit() else (80, 24)
        columns, lines = (min(max(n, 1), 1000) for n in size)
        return cls("stdout" in names, "stderr" in names, columns, lines)


def terminal_of(on_event: OnEvent) -> Terminal:
    """The terminal an event sink shows the command's output on.

    A sink that shows it on a terminal says so with a ``terminal`` attribute (the command
    line's relay); any other callable (a list's ``append``, a test's recorder) is no terminal.
    """
    found = getattr(on_event, "terminal", None)
    return found if isinstance(found, Terminal) else Terminal()


@dataclass
class RunSpec:
    """Everything every backend needs to execute one run; a backend's own settings are its options
    (the image's inputs: `repro.backends.images.ImageInputs`; Slurm's allocation: `SlurmOptions`).

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
    torchrun: bool = False  # launched through torchrun even with one process
    network: bool = False
    gpus: str | None = None  # None, "all" or a count
    store_dir: Path | None = None  # the store recording the run (labels its containers for `repro gc`)
    # Streams that get a pseudo-terminal; None: those that end on the terminal the run is shown on
    # (a replay sets the recorded run's).
    terminal: Terminal | None = None


@dataclass(frozen=True)
class BuiltImage:
    """The environment image a run uses: the record's ImageInfo fields plus the rendered Dockerfile."""

    id: str
    tag: str
    base: str
    base_id: str
    template: str
    dockerfile_text: str
    reused: bool
    build_seconds: float
    loaded: bool = False  # loaded from the archive a capsule carries
    # {normal name: "wheel" | "source"}: how each locked package went into the image; {} unknown
    installed_from: dict[str, str] = field(default_factory=dict)


@dataclass
class RunResult:
    """What a backend reports after the command ended."""

    exit_code: int
    duration_s: float
    interrupted: bool = False
    details: dict[str, Any] = field(default_factory=dict)  # e.g. container id, image id
    image: BuiltImage | None = None  # the image it ran in (docker)
    written: list[str] = field(default_factory=list)  # files the backend saw the command write


class Backend(Protocol):
    """Where a command executes: the current machine, or a container."""

    name: str

    def prepare(self, spec: RunSpec, on_event: OnEvent) -> BuiltImage | None:
        """Get ready to run (build or reuse an image). Returns the image, or None without one.

        Raises:
            BackendUnavailable: the backend cannot run here (no engine, no GPU).
            BuildError: the environment could not be built.
        """
        ...

    def execute(self, spec: RunSpec, on_event: OnEvent) -> RunResult:
        """Run the command to completion, streaming its output as "output" events as it comes.

        Ctrl-C stops what the backend started and returns a result with
        ``interrupted=True`` (exit code 130), so the run is still sealed.

        Raises:
            BackendUnavailable: the backend went away.
        """
        ...


# --------------------------------------------------------------------------- shared helpers

RUNTIME_ENV_DIR = contract.RUNTIME_DIR_ENV  # where the injected runtime writes its files
PROJECT_ENV = contract.PROJECT_ROOT_ENV  # the project root as the process sees it


def runtime_source() -> tuple[Path, Path]:
    """Host paths of (the sitecustomize directory, the directory holding the `repro` package).

    Both go on the process's PYTHONPATH: the first injects seeding and determinism,
    the second makes the optional ``import repro`` API importable (stdlib-only at import).
    """
    package = Path(__file__).resolve().parent.parent
    return package / "runtime" / "inject", package.parent


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


def link_data(spec: RunSpec) -> None:
    """When the data lives elsewhere (a replay from a scratch copy), link it in place (local and slurm)."""
    if spec.data_root is None or spec.data_root.resolve() == spec.project_root.resolve():
        return
    for rel in spec.data:
        target = spec.project_root / rel
        source = spec.data_root / rel
        if target.exists() or target.is_symlink() or not source.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(source.resolve(), target_is_directory=source.is_dir())
