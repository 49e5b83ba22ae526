"""The run's lock: started while the run is captured, settled into the record (and the run) before an
image is built or once the command ended, and checked against what ran."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from repro.backends import registry
from repro.backends.base import (
    Event,
    OnEvent,
)
from repro.config import Plan, Settings
from repro.facts import code as code_capture
from repro.facts import lockplan, locksource
from repro.facts.cudawheels import cuda_in_cpu_lock
from repro.facts.lockfile import mismatches
from repro.fetch.locate import cached_pylock
from repro.fetch.reach import check_reachable
from repro.run.prepared import Prepared
from repro.store.record import Record
from repro.store.runs import Store
from repro.units import plural


def start_lock(root: Path, cwd: Path, run_plan: Plan, on_event: OnEvent) -> lockplan.PendingLock:
    """The lock of the project's requirements (deps.requirements, else those of the folder the command
    runs from, else the root's), compiled in the background while the run goes on."""
    settings = run_plan.settings
    variant = lock_variant(settings, run_plan.gpus)
    configured = settings.requirements or locksource.nearest_source(root, cwd)
    plan = lockplan.plan_lock(root, configured, variant, settings.cuda_index, groups=settings.groups)
    lock = lockplan.PendingLock(plan, check_reachable)
    if plan.ready is not None and plan.ready.project_lock:
        on_event(Event("info", f"lock: {lockplan.describe_project_lock(plan.ready)}"))
    shown = lock.source.relative_to(root).as_posix() if lock.source is not None else None
    if not lock.done and shown is not None:
        on_event(Event("info", f"compiling the {variant} lock from {shown} in the background "
                               "(pip-compile); the record waits for it, the run does not"))  # fmt: skip
    if configured and not settings.requirements:
        on_event(
            Event("info", f"dependencies: {configured}, the requirements of the folder the command runs from")
        )
    return lock


def lock_variant(settings: Settings, gpus: str | None) -> str:
    """Which lock a new run takes: ``local`` where this interpreter runs the command (the local
    backend, Slurm's `python` environment), held at what it has installed; else the image's,
    ``cuda`` for GPUs and ``cpu`` otherwise, a function of the requirements alone."""
    if registry.interpreter_here(settings.backend, settings.section):
        return "local"
    return "cuda" if gpus else "cpu"


LOCK_NOTICE = "lock-uncommitted"  # the marker, under the store's notices, that it was said


def say_lock_uncommitted(store: Store, lock: lockplan.PendingLock, on_event: OnEvent) -> None:
    """Say once per project, at the first run that locks, that git does not track the lock: others
    (and CI) build the environment from the committed one."""
    plan = lock.plan
    if plan.source is None or plan.text is None:
        return  # nothing declared, nothing locked
    pinned = "--hash=" in plan.text
    if plan.variant == "local" and not pinned:
        return  # the local backend's lock holds this environment's versions: the store's, not git's
    path = plan.source if pinned else plan.lock_path  # the project's own lock, or repro's
    marker = store.dir / "notices" / LOCK_NOTICE
    rel = path.relative_to(store.root).as_posix()
    if marker.exists() or code_capture.tracked(store.root, rel) is not False:
        return
    where = f"{rel.rsplit('/', 1)[0]}/" if "/" in rel else rel
    on_event(Event("info", f"{rel} is not committed: commit {where} (`git add {where}`) so others and CI "
                           "build the same environment (said once)"))  # fmt: skip
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()


def settle_lock_as_stage(prepared: Prepared, store: Store, on_event: OnEvent) -> None:
    """`settle_lock`, shown as a build stage when the lock is (or was) compiled for this run.

    Raises:
        BuildError: the lock could not be compiled.
    """
    pending = prepared.lock
    source = pending.source if pending is not None else None
    compiling = pending is not None and source is not None and (not pending.done or bool(pending.lines))
    if pending is not None and source is not None and compiling:
        on_event(Event("stage", f"lock: compiling the {pending.plan.variant} lock from {source.name}"))
    settle_lock(prepared, store, lambda line: on_event(Event("build", line)))
    if compiling:
        on_event(Event("stage-end"))
    warn_cuda_in_cpu_lock(prepared.record, on_event)


def warn_cuda_in_cpu_lock(record: Record, on_event: OnEvent) -> None:
    """Say, before the image is built, that a CPU run's lock holds a CUDA torch (a CUDA-sized image),
    with the pin that avoids it; the record keeps it as a warning."""
    heavy = cuda_in_cpu_lock(record.deps.requirements) if record.deps.variant != "cuda" else None
    if heavy:
        on_event(Event("info", f"warning: {heavy}"))
        record.warn("cuda_in_cpu_lock", heavy)


def settle_lock(prepared: Prepared, store: Store, on_line: Callable[[str], None] | None) -> None:
    """Wait for the run's lock (once) and put it into the record and ``prepared.lockfile``.

    Raises:
        BuildError: the lock could not be compiled.
    """
    pending, record = prepared.lock, prepared.record
    if pending is None:
        return
    prepared.lock = None
    lock = pending.result(on_line)
    record.deps.variant = lock.variant
    if lock.path is None:
        record.warn(
            "not_locked",
            "no requirements.in, requirements.txt, pyproject dependencies or project lockfile (uv.lock, "
            "poetry.lock, pylock.toml): the environment is recorded, not locked",
        )
        return
    root = store.root
    record.deps.lockfile = lock.path.relative_to(root).as_posix()
    record.deps.lock_blob = store.put_file(lock.path)
    record.deps.lock_inputs = lock.inputs_hash
    record.deps.requirements = lock.requirements
    record.deps.cuda = lock.cuda
    record.deps.project_lock = lock.project_lock
    record.deps.groups = list(lock.groups)
    pylock = cached_pylock(lock.path.read_text())
    record.deps.pylock_blob = store.put_bytes(pylock.encode()) if pylock is not None else None
    prepared.lockfile = lock.path


def check_lock(record: Record) -> None:
    """Record where what ran differs from the lock: each package in the record, one warning line."""
    if not record.deps.requirements or not record.deps.freeze:
        return
    found = mismatches(record.deps.requirements, record.deps.freeze)
    record.deps.mismatches = [m.describe() for m in found]
    if found:
        shown = "; ".join(m.describe() for m in found[:6]) + (
            f" (+{len(found) - 6} more)" if len(found) > 6 else ""
        )
        how = "`repro lock --upgrade` re-locks against this environment"
        if record.deps.project_lock:
            lockfile = record.deps.project_lock
            how = f"the project's {lockfile} pins these: install it here, or run with --backend docker"
        record.warn(
            "lock_mismatch",
            f"the lock does not describe what ran ({plural(len(found), 'package')}): {shown} ({how})",
        )
