"""A project's lock of one variant: planned (reused while its inputs hold, from `lockfiles/` or the
per-user cache, or read from the project's own lockfile), else compiled, now or in a background thread.

Compiling takes about a minute, so a lock is reused while the hash of its inputs is unchanged: it
lives in `lockfiles/` in the project, and in a per-user cache shared between projects. A
`requirements.txt` that already carries `--hash=` lines is used as the lock as it is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from repro.errors import BuildError, NotFoundError, UsageError, from_os_error
from repro.facts import projectlock
from repro.facts.lockfile import HEADER, LockedPackage, cache_dir, inputs_header, locked_packages, pin_list
from repro.facts.locksource import find_source
from repro.facts.lockvariants import (
    CUDA_INDEX,
    IMAGE_PYTHON,
    LOCK_DIR,
    PROJECT_LOCK_NAMES,
    Resolution,
    cuda_version,
    inputs_hash,
    known_variant,
    lock_path,
    resolution,
)
from repro.facts.pipcompile import OnLine, Probe, compile_lock
from repro.store import atomic
from repro.store.hashing import hash_bytes
from repro.store.record import DepsInfo, LockVariant


@dataclass
class Lock:
    path: Path | None  # None: nothing declared, nothing locked
    source: Path | None = None
    inputs_hash: str | None = None
    requirements: list[str] = field(default_factory=list)  # name==version, sorted
    compiled: bool = False  # compiled by this call (not reused)
    variant: LockVariant = "cpu"
    cuda: str | None = None  # a cuda lock: the CUDA version its torch is built for ("12.8")
    project_lock: str | None = None  # the project's own lockfile it was read from ("uv.lock"); None: compiled
    groups: list[str] = field(default_factory=list)  # … for these groups and extras besides the main ones


@dataclass
class LockPlan:
    """Where a project's lock of one variant stands: ready, or to be compiled."""

    root: Path
    variant: LockVariant
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
        UsageError: an unknown variant; a project lockfile that is stale, or that holds a package from
            git or a path.
        BuildError: a cuda lock whose torch is a CPU build.
    """
    which = known_variant(variant)
    found = projectlock.find(root, configured)
    if found is not None:
        return _project_plan(root, found, which, install, groups)
    source, text = find_source(root, configured)
    plan = LockPlan(root, which, source, text)
    if source is None or text is None:
        plan.ready = Lock(path=None, variant=which)
        return plan
    if "--hash=" in text:
        pins = pin_list(text)
        digest = hash_bytes(text.encode())
        plan.ready = Lock(source, source, digest, pins, variant=which, cuda=cuda_version(which, pins))
        return plan
    plan.how = resolution(which, text, cuda_index=cuda_index)
    plan.digest = inputs_hash(text, plan.how)
    if plan.lock_path.is_file() and inputs_header(plan.lock_path.read_text()) == plan.digest:
        plan.ready = _lock(plan, compiled=False)
    elif install and plan.cached.is_file():
        _install(plan)
        plan.ready = _lock(plan, compiled=False)
    return plan


def _project_plan(
    root: Path, found: Path, variant: LockVariant, install: bool, groups: tuple[str, ...] | None
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
    plan.ready = Lock(
        path, found, digest, pins, False, variant, cuda_version(variant, pins), read.file, read.groups
    )
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
    cuda = cuda_version(plan.variant, pins)
    return Lock(plan.lock_path, plan.source, plan.digest, pins, compiled, plan.variant, cuda)


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


def complete(
    plan: LockPlan, on_line: OnLine | None = None, upgrade: list[str] | None = None, *, reachable: Probe
) -> Lock:
    """The plan's lock: the reused one, or compiled now (pip-compile's output goes to ``on_line``;
    its index asked first with ``reachable``).

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
    compile_lock(plan.text, plan.how, plan.cached, on_line, previous, upgrade, reachable=reachable)
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
    *,
    reachable: Probe,
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
    return complete(plan, on_line, reachable=reachable)


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

    def __init__(self, plan: LockPlan, reachable: Probe) -> None:
        self.plan = plan
        self._reachable = reachable
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
            self._lock = complete(self.plan, self._line, reachable=self._reachable)
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


def relock(
    root: Path,
    configured: str | None,
    variant: str = "cpu",
    upgrade: list[str] | None = None,
    on_line: OnLine | None = None,
    cuda_index: str | None = CUDA_INDEX,
    groups: tuple[str, ...] | None = None,
    *,
    reachable: Probe,
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
    return complete(plan, on_line, upgrade, reachable=reachable)


def run_packages(deps: DepsInfo, read_blob: Callable[[str | None], bytes | None]) -> list[LockedPackage]:
    """Every package a run's lock pins (read with ``read_blob`` where it was stored), and how each
    went into the run's image: a wheel, a source build, or unknown."""
    lock = read_blob(deps.lock_blob)
    text = lock.decode(errors="replace") if lock is not None else None
    kinds = deps.image.installed_from if deps.image else {}
    return locked_packages(text, deps.requirements, kinds)
