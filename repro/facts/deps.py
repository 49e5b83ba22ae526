"""Dependencies: hash-pinned lockfiles, one per accelerator, reused while their inputs hold.

The lock is compiled from (first found): `deps.requirements` in repro.yaml,
`requirements.in`, a `requirements.txt` that is not already hash-pinned, or the
`[project].dependencies` of pyproject.toml. A `requirements.txt` that already carries
`--hash=` lines is used as the lock as it is.

Three variants come from the same source (see `resolution`): ``cpu`` for CPU images, a
function of the requirements, the index configuration and the platform only (whoever
compiles it, from whichever virtual environment, gets the same bytes; its torch must be
a CPU build); ``local`` for runs on the local backend, where every requirement the
interpreter has installed is held at its installed version so the lock describes what
runs; and ``cuda`` for ``--gpus`` images, resolved for the image's Python and platform
with the torch CUDA wheel index.

Compiling takes about a minute, so a lock is reused while the hash of its inputs (the
source text, the variant's resolution) is unchanged: it lives in `lockfiles/` in the
project, and in a per-user cache shared between projects.
"""

from __future__ import annotations

import errno
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from repro.errors import BuildError, NotFoundError, OSFailure, UsageError, from_os_error
from repro.facts import projectlock
from repro.facts.cudawheels import TORCH_FAMILY, cuda_build
from repro.facts.lockfile import (
    HEADER,
    LockedPackage,
    cache_dir,
    canonical_name,
    inputs_header,
    locked_packages,
    logical_lines,
    pin_list,
)
from repro.facts.reach import check_reachable
from repro.store import atomic
from repro.store.hashing import hash_bytes
from repro.store.record import DepsInfo
from repro.store.runs import STORE_DIR

LOCK_DIR = "lockfiles"
VARIANTS = ("cpu", "cuda", "local")
LOCK_NAMES = {
    "cpu": "requirements.lock.txt",
    "cuda": "requirements-cuda.lock.txt",
    "local": "requirements-local.lock.txt",
}
LOCK_NAME = LOCK_NAMES["cpu"]
LOCAL_LOCK_DIR = f"{STORE_DIR}/locks"  # the local backend's lock: this environment's, kept out of git
# a project lockfile (uv.lock, …) in repro's hash-pinned form, for each variant's environment
PROJECT_LOCK_NAMES = {
    "cpu": "project.lock.txt",
    "cuda": "project-cuda.lock.txt",
    "local": "project-local.lock.txt",
}
IMAGE_PYTHON = "3.11"  # the Python of the bookworm base image
IMAGE_PLATFORM = "manylinux_2_28_x86_64"
CUDA_INDEX = "https://download.pytorch.org/whl/cu128"  # the default of the cuda.index setting

OnLine = Callable[[str], None]
COMPILE_HINT = "check the requirements; the packages must be installable for this Python"


@dataclass
class Lock:
    path: Path | None  # None: nothing declared, nothing locked
    source: Path | None = None
    inputs_hash: str | None = None
    requirements: list[str] = field(default_factory=list)  # name==version, sorted
    compiled: bool = False  # compiled by this call (not reused)
    variant: str = "cpu"
    cuda: str | None = None  # a cuda lock: the CUDA version its torch is built for ("12.8")
    project_lock: str | None = None  # the project's own lockfile it was read from ("uv.lock"); None: compiled
    groups: list[str] = field(default_factory=list)  # … for these groups and extras besides the main ones


@dataclass(frozen=True)
class Resolution:
    """How one lock variant is resolved: for which Python and platform, from which extra index."""

    variant: str
    python: str  # "3.11"
    platform: str | None  # a pip platform tag; None: the host's
    index_url: str | None  # an extra index (the torch CUDA wheels); None: the host's pip configuration
    constraints: tuple[str, ...] = ()  # name==version the lock must keep (local: what is installed)
    torch_build: str | None = None  # "cpu": the lock's torch packages must be CPU builds (+cpu)

    def unresolvable_here(self) -> str | None:
        """Why this machine cannot resolve the lock, or None.

        pip-compile resolves for the interpreter that runs it (it takes no target platform), so
        a lock for the image's platform is compiled only where Python and platform match it.
        """
        if not self.platform:
            return None
        here = f"{sys.version_info.major}.{sys.version_info.minor}"
        if here != self.python or sys.platform != "linux" or platform.machine() != "x86_64":
            return (
                f"the {self.variant} lock is for Python {self.python} on {self.platform}; "
                f"this is Python {here} on {sys.platform} {platform.machine()}"
            )
        return None

    def key(self) -> str:
        return "\n".join(
            [self.variant, self.python, self.platform or f"{sys.platform}-{platform.machine()}",
             self.index_url or "", f"torch-build:{self.torch_build or ''}", *self.constraints]
        )  # fmt: skip


def installed_versions() -> dict[str, str]:
    """{normal name: version} of every distribution this interpreter has installed."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonical_name(name), dist.version)
    return found


def resolution(
    variant: str,
    source_text: str,
    installed: dict[str, str] | None = None,
    cuda_index: str | None = CUDA_INDEX,
) -> Resolution:
    """The resolution of ``variant`` for a requirements source.

    ``cpu`` (CPU images): the host's Python and platform and pip configuration, nothing
    else: the interpreter that runs repro plays no part; a torch package it names must
    resolve to a CPU build (``torch_build``). ``local`` (the local backend): the same, and
    each requirement the source names that is installed at a version it allows is held at
    that version. ``cuda``: the image's Python and platform, with ``cuda_index`` for the torch CUDA
    wheels when the source names a torch package; nothing is held (the host's CPU
    packages are not what runs on the GPU).

    Raises:
        UsageError: an unknown variant.
    """
    if variant == "cuda":
        wants_torch = any(n in TORCH_FAMILY for n in _requirements(source_text))
        return Resolution("cuda", IMAGE_PYTHON, IMAGE_PLATFORM, cuda_index if wants_torch else None)
    if variant not in VARIANTS:
        raise UsageError(f"unknown lock variant {variant!r}", hint=f"one of: {', '.join(VARIANTS)}")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    if variant == "cpu":
        wants_torch = any(n in TORCH_FAMILY for n in _requirements(source_text))
        return Resolution("cpu", python, None, None, (), "cpu" if wants_torch else None)
    here = installed if installed is not None else installed_versions()
    held = []
    for name, req in sorted(_requirements(source_text).items()):
        version = here.get(name)
        if version is not None and req.specifier.contains(version, prereleases=True):
            held.append(f"{name}=={version}")
    return Resolution("local", python, None, None, tuple(held))


def _requirements(text: str) -> dict[str, Requirement]:
    found: dict[str, Requirement] = {}
    for entry in logical_lines(text):
        if entry.startswith("-"):
            continue
        try:
            req = Requirement(entry)
        except InvalidRequirement:
            continue
        found[canonical_name(req.name)] = req
    return found


def find_source(root: Path, configured: str | None) -> tuple[Path | None, str | None]:
    """(the file the lock comes from, its text); a pyproject's dependencies become a text.

    Raises:
        NotFoundError: a configured requirements file is missing.
    """
    if configured:
        path = root / configured
        if not path.is_file():
            raise NotFoundError(f"deps.requirements names {configured!r}, which does not exist")
        return path, path.read_text()
    for name in ("requirements.in", "requirements.txt"):
        path = root / name
        if path.is_file():
            return path, path.read_text()
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            deps = tomllib.loads(pyproject.read_text()).get("project", {}).get("dependencies")
        except tomllib.TOMLDecodeError:
            deps = None
        if deps:
            return pyproject, "\n".join(deps) + "\n"
    return None, None


def nearest_source(root: Path, cwd: Path) -> str | None:
    """The requirements file of the folder a command runs from, when that folder is below the project
    root: the first ``requirements.in``/``requirements.txt`` in it or a folder above it (the root's
    own excluded: `find_source` reads those), relative to ``root``; None when there is none, or when
    the project keeps its own lockfile (uv.lock, poetry.lock, pylock.toml): that is the lock."""
    if projectlock.find(root, None) is not None:
        return None
    try:
        rel = cwd.resolve().relative_to(root.resolve())
    except ValueError:
        return None
    folder = rel
    while folder.parts:
        for name in ("requirements.in", "requirements.txt"):
            if (root / folder / name).is_file():
                return (folder / name).as_posix()
        folder = folder.parent
    return None


def lock_path(root: Path, variant: str) -> Path:
    """Where the lock of ``variant`` lives: an image's in the project's `lockfiles/`, to be committed
    (it is the same for everyone); the local backend's, which holds this environment's installed
    versions, in the store (`.repro/locks/`), never committed."""
    if variant == "local":
        return root / LOCAL_LOCK_DIR / LOCK_NAMES[variant]
    return root / LOCK_DIR / LOCK_NAMES[variant]


def inputs_hash(text: str, how: Resolution) -> str:
    """What a lock depends on: the source text and how the variant is resolved."""
    return hash_bytes(f"{text}\n--\n{how.key()}".encode())


@dataclass
class LockPlan:
    """Where a project's lock of one variant stands: ready, or to be compiled."""

    root: Path
    variant: str
    source: Path | None = None
    text: str | None = None
    how: Resolution | None = None
    digest: str | None = None
    ready: Lock | None = None  # set when no compile is needed

    @property
    def lock_path(self) -> Path:
        return lock_path(self.root, self.variant)

    @property
    def cached(self) -> Path:
        return cache_dir() / "locks" / f"{self.digest}.txt"


def plan_lock(
    root: Path,
    configured: str | None,
    variant: str = "cpu",
    cuda_index: str | None = CUDA_INDEX,
    install: bool = True,
    groups: tuple[str, ...] | None = None,
) -> LockPlan:
    """Find the source and decide whether the lock of ``variant`` can be reused (cheap: no pip).
    ``cuda_index``: the cuda.index setting (None: only the host's pip configuration). A compile of
    the same inputs in repro's cache is copied into the project unless ``install`` is false (a check
    writes nothing). A project lockfile (uv.lock, poetry.lock, pylock.toml) is the lock, read for
    ``groups`` (None: the tool's default groups), never compiled.

    Raises:
        NotFoundError: a configured requirements file is missing.
        UsageError: a project lockfile that is stale, or that holds a package from git or a path.
        BuildError: a cuda lock whose torch is a CPU build.
    """
    found = projectlock.find(root, configured)
    if found is not None:
        return _project_plan(root, found, variant, install, groups)
    source, text = find_source(root, configured)
    plan = LockPlan(root, variant, source, text)
    if source is None or text is None:
        plan.ready = Lock(path=None, variant=variant)
        return plan
    if "--hash=" in text:
        pins = pin_list(text)
        digest = hash_bytes(text.encode())
        plan.ready = Lock(source, source, digest, pins, variant=variant, cuda=_cuda(variant, pins))
        return plan
    plan.how = resolution(variant, text, cuda_index=cuda_index)
    plan.digest = inputs_hash(text, plan.how)
    if plan.lock_path.is_file() and inputs_header(plan.lock_path.read_text()) == plan.digest:
        plan.ready = _lock(plan, compiled=False)
    elif install and plan.cached.is_file():
        _install(plan)
        plan.ready = _lock(plan, compiled=False)
    return plan


def _project_plan(
    root: Path, found: Path, variant: str, install: bool, groups: tuple[str, ...] | None
) -> LockPlan:
    """The plan for a project lockfile: read now, and written (unless ``install`` is false) as
    lockfiles/project.lock.txt (cuda: project-cuda.lock.txt) in the hash-pinned form every lock
    has, for the variant's environment (cpu: this interpreter's; cuda: the image's).

    Raises:
        NotFoundError: it is missing. UsageError: stale, an unknown group, a git or path package.
        BuildError: a cuda lock whose torch is a CPU build.
    """
    if not found.is_file():
        shown = found.relative_to(root).as_posix() if found.is_relative_to(root) else str(found)
        raise NotFoundError(f"deps.requirements names {shown!r}, which does not exist")
    read = projectlock.read(root, found, groups)
    image = variant == "cuda"  # cpu and local: this interpreter's environment
    env = projectlock.environment(IMAGE_PYTHON if image else None, image=image)
    body = read.text(env)
    digest = hash_bytes(f"{found.name}\n{variant}\n{body}".encode())
    plan = LockPlan(root, variant, found, None)
    path = root / LOCK_DIR / PROJECT_LOCK_NAMES[variant]
    text = (
        f"{HEADER}{digest}\n# source: {read.file} (read as it is, never re-resolved; "
        f"refresh it with {projectlock.refresh(read.file)})\n# groups: {', '.join(read.groups) or 'none'}\n"
        f"# variant: {variant}\n{body}"
    )
    if install and (not path.is_file() or path.read_text() != text):
        try:
            atomic.write_bytes(path, text.encode())
        except OSError as e:
            raise from_os_error(e, path) from e
    pins = pin_list(body)
    plan.ready = Lock(path, found, digest, pins, False, variant, _cuda(variant, pins), read.file, read.groups)
    return plan


def describe_project_lock(lock: Lock) -> str:
    """One line on a lock read from the project's lockfile: which file, which groups, not re-resolved."""
    groups = ", ".join(lock.groups) if lock.groups else "none"
    return (
        f"{lock.project_lock} is the lock ({len(lock.requirements)} packages; groups besides the main "
        f"dependencies: {groups}), used as it is, never re-resolved"
    )


def _lock(plan: LockPlan, compiled: bool) -> Lock:
    pins = pin_list(plan.lock_path.read_text())
    cuda = _cuda(plan.variant, pins)
    return Lock(plan.lock_path, plan.source, plan.digest, pins, compiled, plan.variant, cuda)


def _cuda(variant: str, pins: list[str]) -> str | None:
    """A cuda lock's CUDA version (None: it holds no torch).

    Raises:
        BuildError: its torch is a CPU build.
    """
    if variant != "cuda":
        return None
    found = cuda_build(pins)
    return found.version if found else None


_CPU_BUILT = ("torch", "torchvision", "torchaudio")  # the packages with a +cpu build
CPU_INDEX_HINT = (
    "add the CPU wheel index to the requirements (a line `--extra-index-url "
    "https://download.pytorch.org/whl/cpu`), or pin the build: torch==VERSION+cpu"
)


def _cpu_build(how: Resolution, pins: list[str]) -> None:
    """Refuse a CPU image lock whose torch packages are not CPU builds (the index configuration
    offered only CUDA ones: the image would carry gigabytes of CUDA for nothing).

    Raises:
        BuildError: a torch package without the ``+cpu`` local version.
    """
    if how.torch_build != "cpu":
        return
    other = [p for p in pins if p.split("==")[0] in _CPU_BUILT and not p.endswith("+cpu")]
    if other:
        raise BuildError(
            f"the cpu lock must hold CPU builds of torch; the index configuration gave {', '.join(other)}",
            hint=CPU_INDEX_HINT,
        )


def _install(plan: LockPlan) -> None:
    """Copy the cached compile into the project's lockfiles/, with its inputs header."""
    assert plan.source is not None and plan.how is not None
    held = "".join(f"# held: {c}\n" for c in plan.how.constraints)
    index = f"# cuda-index: {plan.how.index_url}\n" if plan.variant == "cuda" and plan.how.index_url else ""
    build = f"# torch-build: {plan.how.torch_build}\n" if plan.how.torch_build else ""
    text = (
        f"{HEADER}{plan.digest}\n# source: {plan.source.relative_to(plan.root).as_posix()}\n"
        f"# variant: {plan.variant}\n{index}{build}{held}" + plan.cached.read_text()
    )
    atomic.write_bytes(plan.lock_path, text.encode())


def complete(plan: LockPlan, on_line: OnLine | None = None, upgrade: list[str] | None = None) -> Lock:
    """The plan's lock: the reused one, or compiled now (pip-compile's output goes to ``on_line``).

    ``upgrade``: None keeps the current pins where the source allows; ``[]`` upgrades every
    package; names upgrade only those.

    Raises:
        BuildError: pip-compile failed (its last lines are in the message).
    """
    if plan.ready is not None and upgrade is None:
        return plan.ready
    if plan.text is None or plan.how is None or plan.digest is None:
        return plan.ready or Lock(path=None, variant=plan.variant)
    previous = plan.lock_path.read_text() if plan.lock_path.is_file() else None
    _compile(plan.text, plan.how, plan.cached, on_line, previous, upgrade)
    _install(plan)
    plan.ready = _lock(plan, compiled=True)
    return plan.ready


def ensure_lock(
    root: Path,
    configured: str | None,
    on_line: OnLine | None = None,
    variant: str = "cpu",
    cuda_index: str | None = CUDA_INDEX,
    groups: tuple[str, ...] | None = None,
) -> Lock:
    """The project's lock of ``variant``: reused when its inputs are unchanged, else compiled.

    Raises:
        BuildError: pip-compile failed; a cuda lock whose torch is a CPU build.
        IndexUnreachable: the cuda.index does not answer.
    """
    plan = plan_lock(root, configured, variant, cuda_index, groups=groups)
    if plan.ready is None and on_line:
        assert plan.source is not None
        on_line(f"compiling the {variant} lock from {plan.source.name} (pip-compile --generate-hashes)")
    return complete(plan, on_line)


def is_stale(
    root: Path,
    configured: str | None,
    variant: str = "cpu",
    cuda_index: str | None = CUDA_INDEX,
    groups: tuple[str, ...] | None = None,
) -> tuple[bool, str]:
    """Whether the project's lock of ``variant`` must be compiled (or, a project lockfile, refreshed
    with its tool), and why (for `repro lock --check`).

    Raises:
        UsageError: a project lockfile with a package from git or a path, or an unknown group.
    """
    try:
        plan = plan_lock(root, configured, variant, cuda_index, install=False, groups=groups)
    except BuildError as e:  # a cuda lock with a CPU torch: compiling again is the way out
        return True, e.message
    except projectlock.Stale as e:
        return True, e.message
    if plan.ready is not None and plan.ready.project_lock:
        return False, f"{plan.ready.project_lock} is the lock, current with pyproject.toml"
    if plan.source is None:
        return False, "no declared dependencies: nothing to lock"
    if plan.how is None:
        return False, f"{plan.source.name} is hash-pinned: it is the lock"
    shown = plan.lock_path.relative_to(root).as_posix()
    if not plan.lock_path.is_file():
        return True, f"no {shown}"
    if inputs_header(plan.lock_path.read_text()) != plan.digest:
        return True, f"{shown} was compiled from other inputs"
    return False, f"{shown} is current"


class PendingLock:
    """A lock compiled in a background thread, so the run starts at once; `result()` waits for it."""

    def __init__(self, plan: LockPlan) -> None:
        self.plan = plan
        self.lines: list[str] = []
        self._sink: OnLine | None = None
        self._lock: Lock | None = plan.ready
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if plan.ready is None:
            self._thread = threading.Thread(target=self._run, name="repro-lock", daemon=True)
            self._thread.start()

    @property
    def source(self) -> Path | None:
        return self.plan.source

    @property
    def done(self) -> bool:
        return self._thread is None or not self._thread.is_alive()

    def _line(self, line: str) -> None:
        self.lines.append(line)
        if self._sink is not None:
            self._sink(line)

    def _run(self) -> None:
        try:
            self._lock = complete(self.plan, self._line)
        except BaseException as e:  # handed to the caller of result()
            self._error = e

    def result(self, on_line: OnLine | None = None) -> Lock:
        """Wait for the lock; lines pip-compile prints from now on go to ``on_line``.

        Raises:
            BuildError: the compile failed.
        """
        if self._thread is not None:
            for line in list(self.lines):
                if on_line:
                    on_line(line)
            self._sink = on_line
            self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._lock is not None
        return self._lock


def _compile(
    text: str,
    how: Resolution,
    dest: Path,
    on_line: OnLine | None,
    previous: str | None = None,
    upgrade: list[str] | None = None,
) -> None:
    elsewhere = how.unresolvable_here()
    if elsewhere:
        raise BuildError(
            f"cannot compile here: {elsewhere}",
            hint=f"run `repro lock --variant {how.variant}` on linux x86_64 with Python {how.python} "
            "(the base image itself will do) and commit lockfiles/",
        )
    if how.index_url:
        check_reachable(how.index_url)  # seconds, where pip would retry for minutes
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        kept = _compile_in_temp(text, how, on_line, previous, upgrade)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _no_space() from e
        raise
    body = "\n".join(kept) + "\n"
    _cuda(how.variant, pin_list(body))  # a CPU torch in a cuda lock is refused, and never cached
    _cpu_build(how, pin_list(body))  # … and a CUDA torch in a CPU image's lock
    try:
        atomic.write_bytes(dest, body.encode())
    except OSError as e:
        raise from_os_error(e, dest) from e


def _compile_in_temp(
    text: str, how: Resolution, on_line: OnLine | None, previous: str | None, upgrade: list[str] | None
) -> list[str]:
    """Run pip-compile in a temporary directory; the lock's lines.

    Raises:
        BuildError: pip-compile failed. OSFailure: the temporary directory is full.
        OSError: a file in it could not be written.
    """
    with tempfile.TemporaryDirectory(prefix="repro-lock-") as tmp:
        src = Path(tmp) / "requirements.in"
        out = Path(tmp) / "requirements.txt"
        body = text
        if how.constraints:
            (Path(tmp) / "held.txt").write_text("\n".join(how.constraints) + "\n")
            body += "\n-c held.txt\n"
        src.write_text(body)
        if previous is not None and upgrade != []:
            out.write_text(previous)  # pip-compile keeps the pins it finds there unless upgrading
        cmd = [
            sys.executable, "-m", "piptools", "compile", "--generate-hashes", "--allow-unsafe",
            "--strip-extras", "--no-emit-index-url", "--no-emit-find-links", "--verbose",
            "--output-file", out.name, src.name,
        ]  # fmt: skip  # relative to the directory it runs in: no temporary path reaches the lock
        if upgrade == []:
            cmd.append("--upgrade")
        for name in upgrade or []:
            cmd += ["--upgrade-package", name]
        if how.index_url:
            cmd += ["--extra-index-url", how.index_url]
        lines = _stream(cmd, tmp, on_line, env={**os.environ, "CUSTOM_COMPILE_COMMAND": remake_command(how)})
        if not out.is_file():
            raise BuildError("pip-compile failed: " + " | ".join(_errors(lines)), hint=COMPILE_HINT)
        return [ln for ln in out.read_text().splitlines() if not ln.startswith("#    pip-compile")]


def remake_command(how: Resolution) -> str:
    """The command a lockfile's header names as the one that remakes it (pip-compile's header would
    name its own temporary files)."""
    return "repro lock" if how.variant == "cpu" else f"repro lock --variant {how.variant}"


def _errors(lines: list[str]) -> list[str]:
    return [ln for ln in lines if ln.strip() and "is ignored" not in ln][-8:]


def _stream(cmd: list[str], cwd: str, on_line: OnLine | None, env: dict[str, str] | None = None) -> list[str]:
    """Run pip-compile, passing each line on as it comes; returns its lines.

    Raises:
        BuildError: pip-compile could not start, or failed.
    """
    try:
        proc = subprocess.Popen(
            cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env
        )
    except OSError as e:
        raise BuildError(f"pip-compile could not run: {e}", hint="pip install pip-tools") from e
    lines: list[str] = []
    crashed = False  # pip's own traceback follows: kept for the error, not shown line by line
    assert proc.stdout is not None
    try:
        with proc.stdout:
            for raw in proc.stdout:
                line = raw.rstrip()
                lines.append(line)
                crashed = crashed or line.startswith("Traceback (most recent call last)")
                if on_line and line and "is ignored" not in line and not crashed:
                    on_line(line)
        code = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if code != 0 and any(mark in line for line in lines for mark in _NO_SPACE):
        raise _no_space()
    if code != 0:
        raise BuildError("pip-compile failed: " + " | ".join(_errors(lines)), hint=COMPILE_HINT)
    return lines


_NO_SPACE = ("No space left on device", "[Errno 28]", "Disk quota exceeded", "[Errno 122]")


def _no_space() -> OSFailure:
    """A full disk while pip-compile ran: where (the temporary directory, or pip's cache when that is
    the fuller of the two: pip's message does not say), and what to point elsewhere."""
    temp = Path(tempfile.gettempdir())
    cache = Path(os.environ.get("PIP_CACHE_DIR") or Path.home() / ".cache" / "pip")
    if cache.is_dir() and _free(cache) < _free(temp):
        return OSFailure(
            f"No space left on device: {cache} (pip's cache, while pip-compile ran)",
            hint="free space there, or point PIP_CACHE_DIR at a disk with room",
        )
    return OSFailure(
        f"No space left on device: {temp} (the temporary directory pip-compile works in)",
        hint="free space there, or point TMPDIR at a disk with room: TMPDIR=/var/tmp repro lock",
    )


def _free(path: Path) -> int:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return 1 << 62


def relock(
    root: Path,
    configured: str | None,
    variant: str = "cpu",
    upgrade: list[str] | None = None,
    on_line: OnLine | None = None,
    cuda_index: str | None = CUDA_INDEX,
    groups: tuple[str, ...] | None = None,
) -> Lock:
    """`repro lock`: the lock of ``variant``, compiled when stale or when upgrading; a project
    lockfile is read as it is (upgrading it is its tool's work).

    Raises:
        NotFoundError: nothing declared to lock.
        UsageError: --upgrade of a project lockfile; a stale one.
        BuildError: pip-compile failed; a cuda lock whose torch is a CPU build.
        IndexUnreachable: the cuda.index does not answer.
    """
    found = projectlock.find(root, configured)
    if found is not None and upgrade is not None:
        raise UsageError(
            f"{found.name} is the project's lock: repro reads it, never re-resolves it",
            hint=f"upgrade with its own tool ({projectlock.upgrade(found.name)}), then run repro again",
        )
    plan = plan_lock(root, configured, variant, cuda_index, groups=groups)
    if plan.source is None:
        raise NotFoundError(
            f"no declared dependencies in {root}: nothing to lock",
            hint="add a requirements.in (or requirements.txt, or [project].dependencies)",
        )
    if plan.how is None:  # a hash-pinned requirements.txt is the lock as it is
        assert plan.ready is not None
        return plan.ready
    return complete(plan, on_line, upgrade)


def run_packages(deps: DepsInfo, read_blob: Callable[[str | None], bytes | None]) -> list[LockedPackage]:
    """Every package a run's lock pins (read with ``read_blob`` where it was stored), and how each
    went into the run's image: a wheel, a source build, or unknown."""
    lock = read_blob(deps.lock_blob)
    text = lock.decode(errors="replace") if lock is not None else None
    kinds = deps.image.installed_from if deps.image else {}
    return locked_packages(text, deps.requirements, kinds)
