"""`repro resume`: continue an interrupted, failed or killed run as a new run linked to it.

The new run has the original's code snapshot, seed, mode, environment variables, data
and backend; it runs the recorded command again in the project, where the original's
outputs (its checkpoints) still are, so the script's own "load if present" logic picks
its checkpoint up. The RNG states every process recorded at each save of the chain are
put where the runtime finds them (repro/collect/checkpoints.py), and the runtime restores them
right after the checkpoint is loaded (repro/runtime/ckptrestore.py).

A run whose repro process died with it (no sealed record) is sealed first, as
interrupted, from what its run directory kept. Core only: returns the sealed record.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from repro import killed, sandbox, start
from repro.backends import leftover, registry
from repro.backends.base import Backend, Event, OnEvent, RunResult
from repro.collect import attribution, checkpoints
from repro.config import Plan, Settings
from repro.errors import CapsuleInvalid, NotFoundError, UsageError
from repro.facts import command_env
from repro.facts.code import SOURCE_SUFFIXES, capture_code, stored_digest
from repro.facts.determinism import allowed_env
from repro.facts.secrets import Redactor, run_masker
from repro.get import get_files
from repro.rerun.execute import Execution, base_note, contain, refuse_hidden_secrets, rerun_record
from repro.rerun.inputs import check_recorded_data, replay_data, shown_inputs
from repro.rerun.request import ReplayRequest, say
from repro.run.collect import collect
from repro.run.execute import build_spec
from repro.run.prepared import Prepared, now_iso
from repro.store import limits
from repro.store.record import FileEntry, Record
from repro.store.runs import Store, is_capsule_ref
from repro.store.statcache import HashCache
from repro.units import plural

RESUMABLE = ("interrupted", "failed")


@dataclass
class Found:
    """The run to resume: its record, and whether it had to be sealed from its run directory first."""

    record: Record
    salvaged: bool = False


def resume(
    store: Store,
    ref: str,
    plan: Plan,
    on_event: OnEvent = lambda e: None,
    *,
    backend: str | None = None,
    env: dict[str, str] | None = None,
    root: Path | None = None,
    on_start: Callable[[Record], None] | None = None,
) -> Record:
    """Continue the run ``ref`` as a new run; returns its sealed record (``resumed_from`` = the original).

    The backend is ``backend``, else the plan's flag or environment value, else the recorded
    one (`Plan.with_recorded`: the record is above the project file). The seed, mode, data and
    code are always the record's: a resume continues the original, it does not start anew.
    ``root`` is where the original executed (default: the project); ``env`` adds variables
    to the resumed processes (what `repro check --interrupt` traces with).

    Raises:
        NotFoundError: no such run. UsageError: a run that succeeded, is still running, or
            whose code changed since. DataDrift: its data changed.
        BackendUnavailable, BuildError: the backend cannot run it (a run from elsewhere: no Docker
            engine and no host backend named, `repro.sandbox`).
    """
    if is_capsule_ref(ref):
        return resume_capsule(store, ref, plan, on_event, backend=backend, env=env, on_start=on_start)
    found = find_resumable(store, ref, plan.settings)
    original = found.record
    foreign = store.is_foreign(original.id)
    plan, backend = _placed(plan, original, foreign, backend, on_event)
    settings = plan.settings
    if found.salvaged:
        on_event(
            Event(
                "info", f"run {original.id} was never sealed (its repro process died): sealed as interrupted"
            )
        )
    root = root or store.root
    check_code(store, settings, original, root)
    check_recorded_data(original, store.root, store, False, store.read_blob)
    record = resumed_record(original, settings)
    passed = command_env.select(original.env.variables, allowed=settings.env_allow)
    record.env.variables.update(passed.env)
    if foreign:  # as a replay does: repro's own list of variables, never a record's
        record.determinism.env, _ = allowed_env(original.determinism.env)
    where = start.Start(backend, registry.recorded_options(backend, original, foreign))
    prepared = _prepare(store, original, record, settings, root, passed.env, env or {}, foreign)

    def ready(chosen: Backend) -> list[str]:
        record.backend.requested = backend
        if on_start is not None:
            on_start(record)
        return []

    head = f"resuming {original.id} as {record.id}"
    record = start.execute(prepared, where, store, on_event, head=head, ready=ready)
    other_base = base_note(original.deps.image, record.deps.image)
    if other_base:
        on_event(Event("info", other_base))
        record.warn("base_image_changed", other_base)
    record.results.outputs = carried_outputs(original.results.outputs, record.results.outputs)
    store.seal(record, prepared.run_dir)
    return record


def resume_capsule(
    store: Store,
    ref: str,
    plan: Plan,
    on_event: OnEvent,
    *,
    backend: str | None = None,
    env: dict[str, str] | None = None,
    on_start: Callable[[Record], None] | None = None,
) -> Record:
    """Continue the interrupted run a capsule file holds, in this project, as a new run of its store.

    As `repro replay CAPSULE` does: the capsule is verified and imported (marked as from elsewhere);
    its code is restored into a copy beside the new run, its carried data placed there, and the
    killed run's kept outputs (its checkpoints) written into that copy at their recorded paths; the
    RNG states recorded at each save are put where the runtime finds them. It runs in the container
    sandbox unless a host backend is named, without a network, with repro's own set of variables.
    The new outputs are kept with the new run (`repro get`); the copy is removed.

    Raises:
        UsageError: the capsule's run succeeded, is a replay, was captured in-process, or carries
            none of its outputs. CapsuleInvalid: the capsule fails verification, or names an unsafe
            output path. DataDrift: its data is neither carried nor here as recorded.
        BackendUnavailable: no Docker engine and no host backend named.
    """
    loaded = store.resolve(ref)  # the file is verified (every member against SHA256SUMS) on opening
    original = loaded.record
    _refuse_unresumable(original, Path(ref).name)
    capsule_blobs = loaded.blob_root
    loaded = store.import_run(loaded)  # every blob re-hashed on the way in
    plan, chosen = _placed(plan, original, True, backend, on_event)
    settings = dataclasses.replace(plan.settings, backend=chosen)
    notes: list[str] = []
    refuse_hidden_secrets(original)
    request = ReplayRequest(ref=ref)
    data_root, data = replay_data(request, loaded, settings, store, capsule_blobs, notes, on_event)
    record = resumed_record(original, settings)
    for note in contain(record, original, network=False):
        say(note, notes, on_event)
    passed = command_env.select(original.env.variables, allowed=settings.env_allow)
    record.env.variables.update(passed.env)

    def setup(root: Path, prepared: Prepared) -> None:
        placed = get_files(loaded, [], root, force=True)  # every path checked: plain, relative, inside
        seeded = checkpoints.seed_runtime(
            prepared.spec.runtime_dir, original.results.checkpoints, loaded.read_blob
        )
        prepared.spec.env[checkpoints.RESUMED_FROM_ENV] = original.id
        prepared.spec.env.update(env or {})
        on_event(Event("info", _restored_line(placed.written, seeded)))
        if on_start is not None:
            on_start(record)

    run = Execution(loaded, record, settings, data_root, passed.env, notes, None, data, request.max_data_size,
                    setup=setup, head="resuming")  # fmt: skip
    root = run.execute(store, on_event, blob_path=None)
    record = run.record
    record.results.outputs = carried_outputs(original.results.outputs, record.results.outputs)
    for note in notes:
        record.warn("replay_condition", note)
    store.seal(record, run.run_dir)
    shutil.rmtree(root, ignore_errors=True)
    return record


def _restored_line(written: list[FileEntry], seeded: int) -> str:
    """What a resume from a capsule put in place before its command starts, in one line."""
    shown = ", ".join(e.path for e in written[:3]) + (
        f" (+{len(written) - 3} more)" if len(written) > 3 else ""
    )
    return (
        f"restored its code and {plural(len(written), 'kept output')} ({shown or 'none'}) into a copy beside "
        f"the new run, and {plural(seeded, 'RNG state')} recorded at its saves"
    )


def _refuse_unresumable(original: Record, name: str) -> None:
    """Raises: UsageError: the capsule's run is not one to continue, or carries none of its outputs."""
    if original.kind == "replay":
        raise UsageError(f"{name} holds replay {original.id}; resume the run it replays, {original.parent}")
    if original.captured_in_process:
        raise UsageError(
            f"{name} holds run {original.id}, captured in-process: there is no command to resume"
        )
    if original.results.status not in RESUMABLE:
        raise UsageError(
            f"{name} holds run {original.id}, which {original.results.status}: there is nothing to resume",
            hint="`repro resume CAPSULE` continues an interrupted, failed or killed run; "
            f"`repro replay {name}` re-executes a finished one",
        )
    for info in original.results.checkpoints:  # recorded relative only when inside the project
        if not (Path(info.path).is_absolute() or limits.is_safe_relpath(info.path)):
            raise CapsuleInvalid(f"{name} names a checkpoint outside the project: {info.path!r}")
    if original.results.outputs and not any(e.stored for e in original.results.outputs):
        raise UsageError(
            f"{name} holds run {original.id} without its outputs (its checkpoints): nothing to resume from",
            hint="export the run again from its store, with the outputs kept (store.max_output_bytes)",
        )


def _placed(
    plan: Plan, original: Record, foreign: bool, backend: str | None, on_event: OnEvent
) -> tuple[Plan, str]:
    """The plan the resume runs with and its backend: ``backend``, else the plan's or the recorded one
    (a run from elsewhere: the sandbox's, `repro.sandbox`).

    Raises:
        BackendUnavailable: a run from elsewhere, no backend named, and no Docker engine.
    """
    placement = sandbox.place(plan, original.backend.name, foreign)
    if backend is None:
        sandbox.require_engine(placement)
    if placement.note:
        on_event(Event("info", placement.note))
    return placement.plan, backend or placement.plan.settings.backend


def _prepare(
    store: Store,
    original: Record,
    record: Record,
    settings: Settings,
    root: Path,
    variables: dict[str, str],
    env: dict[str, str],
    foreign: bool,
) -> Prepared:
    """The resumed run's directory and spec: the recorded command in ``root``, where the original's
    checkpoints are, with the RNG states of its saves put where the runtime finds them."""
    run_dir = store.begin_run(record.id, record.command.argv)
    if foreign:
        store.mark_foreign(record.id, f"resumed {original.id}, a run from elsewhere")
    outputs = list(original.results.output_roots) or list(settings.outputs)
    lockfile = start.restore_lockfile(original, store.read_blob, run_dir)
    with HashCache(store.cache_dir / "hashes.sqlite") as cache:  # the host decides what it shows
        data = shown_inputs(original, store.root, own=not foreign, cache=cache)
    spec = build_spec(
        record, root, run_dir, data, outputs, original.command.executed(), data_root=store.root,
        variables=variables,
    )  # fmt: skip
    spec.env[checkpoints.RESUMED_FROM_ENV] = original.id
    spec.env.update(env)
    checkpoints.seed_runtime(spec.runtime_dir, original.results.checkpoints, store.read_blob)
    before = attribution.snapshot(root, outputs)
    tree = attribution.snapshot_tree(root, spec.data)
    return Prepared(
        record, spec, run_dir, before, settings, time.time_ns(), tree, foreign=foreign, lockfile=lockfile
    )


def find_resumable(store: Store, ref: str, settings: Settings) -> Found:
    """The run a ref names, sealed or not; an unsealed one whose processes are gone is sealed first.

    Raises:
        NotFoundError: no such run. UsageError: it succeeded, is a replay, or is still running.
    """
    unsealed = killed.unsealed(store, ref)
    if unsealed is not None:
        record = salvage(store, unsealed, settings)
        return Found(record, salvaged=True)
    record = store.resolve(ref).record
    if record.kind == "replay":
        raise UsageError(f"run {record.id} is a replay; resume the run it replays, {record.parent}")
    if record.results.status not in RESUMABLE:
        raise UsageError(
            f"run {record.id} {record.results.status}: there is nothing to resume",
            hint="`repro resume` continues an interrupted, failed or killed run",
        )
    return Found(record)


def salvage(store: Store, run_id: str, settings: Settings) -> Record:
    """Seal a run whose repro process died, as interrupted, from what its run directory kept; the
    files a docker run left in its copy of the project are brought back first (`leftover`), and
    recorded as its outputs (the checkpoints to resume from among them).

    Raises:
        UsageError: it, a process of its command or its container is still running.
        NotFoundError: it kept no record to resume from.
        CapsuleInvalid: its left-over copy's state is unreadable.
    """
    if store.is_running(run_id):
        raise UsageError(f"run {run_id} is still running", hint="stop it first, or wait until it ends")
    written = leftover.recover(store, run_id)  # what a killed docker run left in its copy
    pending = store.load_pending(run_id)
    if pending is None:
        raise NotFoundError(
            f"run {run_id} never started its command, or kept nothing to resume from",
            hint="`repro gc` removes incomplete runs",
        )
    record, kept = pending
    run_dir = store.runs_dir / run_id
    outputs = [str(o) for o in kept.get("outputs", [])]
    data = [str(d) for d in kept.get("data", [])]
    spec = build_spec(record, store.root, run_dir, data, outputs, record.command.executed())
    before = {k: (int(v[0]), int(v[1]), int(v[2])) for k, v in kept.get("before", {}).items()}
    record.results.finished = now_iso()
    prepared = Prepared(record, spec, run_dir, before, settings)
    result = RunResult(exit_code=137, duration_s=0.0, interrupted=True, written=written)
    collect(record, result, spec, store, prepared)
    record.results.duration_s = None
    record.warn("repro_died", "the repro process died with the run; sealed as interrupted by `repro resume`")
    store.seal(record, run_dir)
    return record


def check_code(store: Store, settings: Settings, original: Record, root: Path) -> None:
    """Refuse to resume on code at ``root`` other than the recorded snapshot.

    The code is what the run imported and opened (``code.read``, when the record says) and every
    source file (a module imported later in training was not read yet when the run was killed);
    other files of the snapshot (notes, a log the shell writes) do not stop a resume. Files runs
    wrote (the original's outputs, outputs of earlier runs) are not code; neither is the file this
    process's own output goes to.

    Raises:
        UsageError: a recorded file changed or is gone, or a new Python file appeared.
    """
    exclude = [i.path for i in original.data.inputs] + list(original.results.output_roots or settings.outputs)
    with HashCache(store.cache_dir / "hashes.sqlite") as cache:
        now = capture_code(root, lambda p, d: d, exclude=[*exclude, "lockfiles"], cache=cache).info
    written = {o.path for o in original.results.outputs} | set(original.code.earlier_outputs)
    read = set(original.code.read) if original.code.read is not None else None
    recorded = {
        f.path: f.hash
        for f in original.code.files
        if f.path not in written and (read is None or f.path in read or f.path.endswith(SOURCE_SUFFIXES))
    }
    current = {f.path: f.hash for f in now.files}
    masker = run_masker(dict(os.environ), [], [], Redactor(settings.secret_patterns))

    def same(rel: str, digest: str) -> bool:  # a file stored masked is recorded by its masked digest
        if rel not in current:
            return False
        return current[rel] == digest or stored_digest(root / rel, masker, root) == digest

    changed = sorted(p for p, h in recorded.items() if not same(p, h))
    changed += sorted(p for p in current if p not in recorded and p.endswith(".py"))
    if changed:
        shown = ", ".join(changed[:5]) + (f" (+{len(changed) - 5} more)" if len(changed) > 5 else "")
        raise UsageError(
            f"the code changed since run {original.id}: {shown}",
            hint="a resume runs the recorded code; restore it (git stash, or check out "
            f"{(original.code.commit or 'the recorded commit')[:12]}) and resume again",
        )


def resumed_record(original: Record, settings: Settings) -> Record:
    """The new run's record: the original's inputs and settings, a fresh id, this machine, no results."""
    record = rerun_record(original, settings)
    record.kind = "check" if original.kind == "check" else "run"
    record.resumed_from = original.id
    return record


def carried_outputs(earlier: list[FileEntry], new: list[FileEntry]) -> list[FileEntry]:
    """The chain's outputs: the earlier run's, replaced by what the resumed run wrote again."""
    merged = {e.path: e for e in earlier}
    merged.update({e.path: e for e in new})
    return [merged[p] for p in sorted(merged)]


def chain(store: Store, record: Record) -> list[Record]:
    """The runs a resumed run continues, first run first, ending with ``record``."""
    runs = [record]
    seen = {record.id}
    while runs[0].resumed_from and runs[0].resumed_from not in seen:
        try:
            runs.insert(0, store.load_run(runs[0].resumed_from).record)  # by id: never a path
        except NotFoundError:
            break
        seen.add(runs[0].id)
    return runs
