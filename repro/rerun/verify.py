"""A recorded run verified by executing it again: its code restored, its data checked, re-executed,
compared with its record → a Verdict. What `repro replay` and `repro check --against` do.

The re-execution is itself a run (kind "replay" or "check", parent = the original), sealed in the
store, so `repro diff ORIGINAL REPLAY` works afterwards.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from repro import sandbox
from repro import window as windows
from repro.backends import registry
from repro.backends.base import Event, OnEvent
from repro.compare import ops
from repro.compare.verdict import CompareOptions, Known, Verdict, compare_runs
from repro.config import Plan, Settings
from repro.errors import UsageError
from repro.facts import command_env
from repro.facts.determinism import verifiable_mode
from repro.facts.lockfile import freeze_diff
from repro.integrations import mlflow as mlflow_stores
from repro.integrations import trackers
from repro.rerun.execute import (
    Execution,
    base_note,
    fit_world_size,
    new_record,
    refuse_hidden_secrets,
    uses_gpu,
)
from repro.rerun.inputs import replay_data
from repro.rerun.request import ReplayOutcome, ReplayRequest, resolve_trusted, say
from repro.rerun.sides import of_run, outputs_only, resumed_note, tolerance, verification
from repro.runtime import contract
from repro.store.record import CodeInfo, Record, RecordKind
from repro.store.runs import LoadedRun, Store
from repro.units import plural


def verify_run(
    request: ReplayRequest,
    store: Store,
    plan: Plan,
    on_event: OnEvent,
    *,
    code: CodeInfo | None = None,
    kind: RecordKind = "replay",
) -> ReplayOutcome:
    """Replay a run and compare it with its record.

    The backend is the plan's flag or environment value, else the recorded one
    (`Plan.with_recorded`); a run from elsewhere runs in the container sandbox unless the flag or
    environment names a host backend (`repro.sandbox`). The recorded variables the user set are set
    again by `repro.facts.command_env`'s rule (``request.env`` widens it). ``code`` replays other code
    (a capture of today's working tree, its files in the store) instead of the recorded code —
    what `repro check --against` does.

    Raises:
        DataDrift: the recorded data changed (unless allowed).
        UsageError: a world size change not allowed, redacted argv, unrestorable code, an ``--env``
            name no record may set.
        BackendUnavailable: the backend cannot run here (a run from elsewhere: no Docker engine and
            no host backend named).
        CapsuleInvalid: recorded Slurm options of a shape repro does not pass to sbatch.
    """
    loaded, capsule_blobs = _replayable(request, store, on_event)
    original = loaded.record
    placement = sandbox.place(plan, original.backend.name, loaded.foreign)
    sandbox.require_engine(placement)
    plan = placement.plan
    notes: list[str] = []
    if placement.note:
        say(placement.note, notes, on_event)
    refuse_hidden_secrets(original)
    data_root, data = replay_data(request, loaded, plan.settings, store, capsule_blobs, notes, on_event)
    drift = data.drift
    window = None
    if request.from_checkpoint:
        window = windows.choose(original, request.from_checkpoint, request.steps, len(of_run(loaded).trace))
        window.spoil = request.spoil
        notes.append(window.describe())
    record, variables = new_record(request, original, plan.settings, notes, on_event)
    record.kind = kind
    if code is not None:
        record.code = code
    world_changed = fit_world_size(request, original, record, notes)
    if request.ops:
        record.determinism.env[contract.OPS_ENV] = str(request.ops)
        if request.ops_only:
            record.determinism.env[contract.OPS_STOP_ENV] = "1"
            notes.append(f"recorded for its op stream: stopped after {plural(request.ops, 'optimizer step')}")
    run = Execution(
        loaded, record, plan.settings, data_root, variables, notes, window, data, request.max_data_size,
        user_root=request.data_root is not None or not loaded.foreign,
    )  # fmt: skip
    if request.taken is not None:
        store.mark_helper(record.id, f"an experiment on run {original.id}")
    root = run.execute(store, on_event, blob_path=store.blob_path if code is not None else None)
    _what_differed(original, record, notes, on_event)
    known = Known(world_size_changed=world_changed)
    verdict = _compare(request, store, loaded, record, plan.settings, window, notes, known)
    verdict.notes += notes
    shutil.rmtree(root, ignore_errors=True)
    for note in notes:
        record.warn("replay_condition", note)
    record.verification = {**verification(verdict, original.id), **(request.taken or {})}
    store.seal(record, run.run_dir)
    _after(request, store, plan, on_event, kind, loaded, record, verdict)
    return ReplayOutcome(original, record, verdict, drift, notes)


def _after(
    request: ReplayRequest, store: Store, plan: Plan, on_event: OnEvent, kind: RecordKind, loaded: LoadedRun,
    record: Record, verdict: Verdict,
) -> None:  # fmt: skip
    """What follows a sealed re-execution: its verdict told to the trackers, and a divergence
    explained by its first differing op. A helper execution (``request.taken``) tells no tracker."""
    original = loaded.record
    if not request.ops_only and request.taken is None:  # a cut-short execution has no verdict to report
        trackers.report_verdict(
            [original, record], verdict.status, store.root, lambda s: on_event(Event("info", s)),
            loaded.foreign,
        )  # fmt: skip
    recorded = ops.streams(original.results.logs, loaded.read_blob)  # the original ran with --ops
    if (request.ops or recorded) and not request.ops_only and verdict.status != "identical":
        _first_op(request, store, plan, on_event, kind, loaded, record, verdict)


def _first_op(
    request: ReplayRequest, store: Store, plan: Plan, on_event: OnEvent, kind: RecordKind, loaded: LoadedRun,
    record: Record, verdict: Verdict,
) -> None:  # fmt: skip
    """Explain a divergence by its first differing op: the replay's op stream against the
    original's — recorded with the original when it was run with ``--ops``, else a fresh execution
    of the original's command with its recorded code (`check --against` replays other code),
    stopped after the window (up to the first differing step of the trace, else ``request.ops``
    steps)."""
    recorded = loaded.record.determinism.env.get(contract.OPS_ENV, "")
    steps = request.ops or (int(recorded) if recorded.isdigit() else contract.DEFAULT_OPS_STEPS)
    if verdict.trace is not None and verdict.trace.kind == "value":
        steps = min(steps, verdict.trace.step + 1)
    if ops.explained_by(verdict) is not None:  # nothing to execute: the note says what explains it
        ops.explain(verdict, {}, {}, steps, "")
        return
    theirs = ops.streams(loaded.record.results.logs, loaded.read_blob)
    source = "the original's"
    if not theirs:
        on_event(
            Event("info", f"re-executing the original's command for its op stream ({plural(steps, 'step')})")
        )
        again = dataclasses.replace(request, ref=loaded.record.id, ops=steps, ops_only=True)
        fresh = store.load_run(verify_run(again, store, plan, on_event, kind=kind).replay.id)  # its own code
        theirs = ops.streams(fresh.record.results.logs, fresh.read_blob)
        store.remove_run(fresh.record.id)  # an execution cut short for its stream is no run of the store
        source = "a fresh execution of the original's command, cut short for its op stream (not kept)"
    replayed = store.load_run(record.id)
    ops.explain(verdict, theirs, ops.streams(replayed.record.results.logs, replayed.read_blob), steps, source)


def _replayable(request: ReplayRequest, store: Store, on_event: OnEvent) -> tuple[LoadedRun, Path | None]:
    """The run the request names, in the store, with a command to replay; and where the blobs of a
    capsule file were extracted (its carried data among them), None for a run of the store.

    Raises:
        UsageError: a run captured in-process; an ``--env`` name no record may set.
        NotFoundError, CapsuleInvalid: see `resolve_trusted`.
    """
    loaded = request.run or resolve_trusted(store, request.ref, request.trust, on_event)
    capsule_blobs = loaded.blob_root if loaded.from_capsule else None
    if loaded.from_capsule:
        loaded = store.import_run(loaded)
    original = loaded.record
    if original.captured_in_process:
        raise UsageError(
            f"run {original.id} was captured in-process (repro.capture); there is no command to replay",
            hint="record it with `repro run` to make it replayable",
        )
    command_env.check_asked(request.env)
    return loaded, capsule_blobs


def _what_differed(original: Record, record: Record, notes: list[str], on_event: OnEvent) -> None:
    """Note how the replay's environment differed from the original's: image base, packages, CPU, CUDA."""
    gone = mlflow_stores.left_in_copy(record.results.trackers)
    if gone:
        notes.append(gone)
    other_base = base_note(original.deps.image, record.deps.image)
    if other_base:
        say(other_base, notes, on_event)
    if registry.in_place(record.backend.name) and original.deps.freeze and record.deps.freeze:
        changed = freeze_diff(original.deps.freeze, record.deps.freeze)
        if changed:
            shown = "; ".join(changed[:6]) + (f" (+{len(changed) - 6} more)" if len(changed) > 6 else "")
            notes.append(f"installed packages differ from the record: {shown}")
    if original.env.cpu_model != record.env.cpu_model:
        notes.append(f"other CPU: {original.env.cpu_model} → {record.env.cpu_model}")
    cuda = original.env.cuda and record.env.cuda and original.env.cuda != record.env.cuda
    if uses_gpu(original) and cuda:
        notes.append(
            f"CUDA changed: {original.env.cuda} → {record.env.cuda} (expect within_tolerance at best)"
        )


def _compare(
    request: ReplayRequest,
    store: Store,
    loaded: LoadedRun,
    record: Record,
    settings: Settings,
    window: windows.Window | None,
    notes: list[str],
    known: Known,
) -> Verdict:
    """The replay against its record: a window against the trace, a resumed chain by its outputs."""
    original = loaded.record
    replayed = store.load_run(record.id)
    mode = verifiable_mode(original.determinism, record.determinism)
    if original.determinism.applied is False or record.determinism.applied is False:
        which = "original run" if original.determinism.applied is False else "replay"
        notes.append(
            f"the repro runtime did not load in the {which}: nothing was seeded; compared as mode off"
        )
    tol, options = tolerance(mode, request.atol, request.rtol), CompareOptions.from_settings(settings)
    if window is not None:
        return windows.compare(of_run(loaded), of_run(replayed), window, mode, tol, options, known)
    if original.resumed_from:
        notes.append(resumed_note(store, original))
        return compare_runs(
            outputs_only(of_run(loaded)), outputs_only(of_run(replayed)), mode, tol, options, known
        )
    return compare_runs(of_run(loaded), of_run(replayed), mode, tol, options, known)
