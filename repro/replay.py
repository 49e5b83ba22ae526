"""`repro replay`: restore a capsule's code, check its data, re-execute, compare → a Verdict.

The replay is itself a run (kind "replay", parent = the original), sealed in the store,
so `repro diff ORIGINAL REPLAY` works afterwards.
"""

from __future__ import annotations

import atexit
import copy
import dataclasses
import functools
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from repro import __version__, sandbox, start
from repro import window as windows
from repro.backends import registry
from repro.backends.base import Backend, BuiltImage, Event, OnEvent, RunSpec, Terminal
from repro.collect.attribution import snapshot_tree
from repro.compare import ops
from repro.compare.verdict import CompareOptions, Side, Tolerance, Verdict, compare_runs
from repro.config import Plan, Settings
from repro.diff import results
from repro.errors import CapsuleInvalid, DataDrift, DataUnavailable, ReproError, UsageError, from_os_error
from repro.facts import command_env
from repro.facts.code import restore_code
from repro.facts.data import Drift, check_data
from repro.facts.determinism import allowed_env, expectation, verifiable_mode, with_threads
from repro.facts.env import host_env
from repro.facts.lockfile import freeze_diff
from repro.facts.secrets import REDACTED, Redactor, redacted_options
from repro.facts.sources import (
    CAPSULE,
    CARRIED,
    DATA_REMOTE,
    DVC,
    HERE,
    NOWHERE,
    STORE,
    InputSource,
    locate_inputs,
)
from repro.integrations import dvc as dvc_data
from repro.integrations import mlflow as mlflow_stores
from repro.integrations import trackers
from repro.runner import Prepared, build_spec, now_iso
from repro.runtime import contract
from repro.store import datablobs, limits, signing
from repro.store.capsule import (
    IMAGE_MEMBER,
    CodeInfo,
    EnvInfo,
    FileEntry,
    ImageInfo,
    Record,
    ResultInfo,
    open_member,
)
from repro.store.hashing import HashCache
from repro.store.rundir import RunDir
from repro.store.runs import LoadedRun, Store, new_run_id
from repro.units import plural


@dataclass
class ReplayRequest:
    ref: str
    data_root: Path | None = None
    allow_data_drift: bool = False
    atol: float | None = None
    rtol: float | None = None
    allow_world_size_change: bool = False
    nproc_per_node: int | None = None
    from_checkpoint: str | None = None  # replay only a window after this recorded checkpoint
    steps: int | None = None  # … of this many optimizer steps (default: to the next checkpoint)
    network: bool = False  # the capsule's own `backend.network` is never obeyed
    trust: signing.Trust | None = None  # a capsule's signature, checked before anything is extracted
    env: tuple[str, ...] = ()  # recorded variables to set again beyond the safe set (`--env NAME`)
    max_data_size: int = limits.MAX_DATA_BYTES  # the most carried data placed (`--max-data-size`)
    ops: int | None = None  # `--ops`: record the op stream of this many optimizer steps, and explain
    ops_only: bool = False  # an execution for its op stream alone: it stops after those steps
    threads: int | None = None  # `--threads N`: another intra-op thread count than the recorded one


@dataclass
class ReplayOutcome:
    original: Record
    replay: Record
    verdict: Verdict
    drift: Drift | None = None
    notes: list[str] = field(default_factory=list)


def side(loaded: LoadedRun) -> Side:
    """A run's results as the comparison sees them (`repro.diff.results`)."""

    def open_blob(digest: str) -> Path | None:
        return loaded.blob_path(digest)

    return results.side_of(loaded.record, loaded.read_blob, open_blob)


def describe_gpus(env: EnvInfo) -> str:
    """``2× NVIDIA H100 80GB HBM3 (driver 550.54, CUDA 12.4)``, or ``no GPU``."""
    if not env.gpus:
        return "no GPU"
    names = sorted({str(g.get("name", "?")) for g in env.gpus})
    facts = [f"driver {env.driver}" if env.driver else None, f"CUDA {env.cuda}" if env.cuda else None]
    shown = ", ".join(f for f in facts if f)
    return f"{len(env.gpus)}× {' + '.join(names)}" + (f" ({shown})" if shown else "")


def uses_gpu(record: Record) -> bool:
    """Whether the run's result depends on its GPUs: gpu mode, or GPUs given to the run."""
    return record.determinism.mode == "gpu" or bool(record.backend.gpus)


def gpu_hardware_note(recorded: EnvInfo, here: EnvInfo) -> str:
    """What replaying a GPU run on this machine means for the verdict, in one line.

    Compares GPU model and count, driver and CUDA (a side unknown on either record is
    not compared): the same everywhere → gpu mode's deterministic kernels can give
    identical bytes; any difference → within_tolerance at best; no GPU → cannot run.
    """
    head = f"recorded on {describe_gpus(recorded)}, replaying on {describe_gpus(here)}"
    if not recorded.gpus:
        return head + " — the record names no GPU; the replay's GPUs are not compared"
    if not here.gpus:
        return head + " — the replay needs a GPU and cannot run here"
    differences = []
    if sorted(str(g.get("name")) for g in recorded.gpus) != sorted(str(g.get("name")) for g in here.gpus):
        same_model = {g.get("name") for g in recorded.gpus} == {g.get("name") for g in here.gpus}
        differences.append("other GPU count" if same_model else "other GPU model")
    for label, a, b in (("driver", recorded.driver, here.driver), ("CUDA", recorded.cuda, here.cuda)):
        if a and b and a != b:
            differences.append(f"other {label}")
    if differences:
        return f"{head} — {', '.join(differences)}: expect within_tolerance at best"
    return f"{head} — same GPUs, driver and CUDA: gpu mode's deterministic kernels can come back identical"


def tolerance(mode: str, atol: float | None, rtol: float | None) -> Tolerance | None:
    if atol is None and rtol is None:
        return None
    from repro.compare.verdict import tolerance_for

    base = tolerance_for(mode)
    return Tolerance(atol=base.atol if atol is None else atol, rtol=base.rtol if rtol is None else rtol)


def verification(verdict: Verdict, of: str) -> dict[str, str]:
    """What a replay's (or a check run's) record keeps of its verdict against run ``of``."""
    return {"of": of, "status": verdict.status, "summary": verdict.summary}


def check_recorded_data(
    original: Record, data_root: Path, store: Store, allow: bool, read_blob: Callable[[str], bytes | None]
) -> Drift | None:
    """Hash the data the capsule names under ``data_root``; stop on drift unless allowed.

    Raises:
        DataDrift: the data differs and drift is not allowed.
    """
    if not original.data.inputs:
        return None
    with HashCache(store.cache_dir / "hashes.sqlite") as cache:
        drift = check_data(original.data.inputs, data_root, cache=cache, read_blob=read_blob)
    if drift and not allow:
        raise DataDrift(drift.changed, drift.missing, drift.extra)
    return drift or None


def _replay_data(
    request: ReplayRequest,
    loaded: LoadedRun,
    settings: Settings,
    store: Store,
    capsule_blobs: Path | None,
    notes: list[str],
    on_event: OnEvent,
) -> tuple[Path, DataChoice]:
    """Where the replay reads each declared input: the host's data where it is as recorded, else
    blobs at hand (capsule, store, data remote: `choose_data`) or a fetch through DVC; said in the
    notes. Returns the data root and the choice.

    Raises:
        DataDrift: the data differs, nothing replaces it, and drift is not allowed.
        DataUnavailable: DVC could not fetch the recorded versions.
    """
    original = loaded.record
    data_root = (request.data_root or store.root).resolve()
    remote = datablobs.remote_root(settings.data_remote, store.root)
    roots = datablobs.blob_roots(capsule_blobs, store.dir, remote)
    data_root = _data_from_dvc(request, original, data_root, store, roots, loaded.read_blob, notes, on_event)
    data = choose_data(original, data_root, store, roots, request, loaded.read_blob)
    if data.drift:
        notes.append(data.drift.describe() + " (allowed by --allow-data-drift)")
    for note in data.notes():
        _say(note, notes, on_event)
    _keep_carried(data, original, loaded.read_blob, remote or store.dir)
    return data_root, data


def _data_from_dvc(
    request: ReplayRequest,
    original: Record,
    data_root: Path,
    store: Store,
    roots: datablobs.BlobRoots,
    read_blob: Callable[[str], bytes | None],
    notes: list[str],
    on_event: OnEvent,
) -> Path:
    """Where the replay reads its data: ``data_root``; or, when DVC tracks the recorded inputs and the
    data there differs (or is absent), a scratch copy of the recorded versions fetched through DVC and
    checked against the manifest. Not with --data-root or --allow-data-drift (the user chose the data),
    nor when blobs at hand (carried in the capsule, kept in the store or the data remote) hold every
    recorded file: `choose_data` places those without a fetch.

    Raises:
        DataUnavailable: DVC could not fetch the recorded versions.
        DataDrift: what DVC fetched differs from the manifest (the files named).
    """
    if request.data_root is not None or request.allow_data_drift or not dvc_data.tracked(original):
        return data_root
    with HashCache(store.cache_dir / "hashes.sqlite") as cache:
        if not check_data(original.data.inputs, data_root, cache=cache, read_blob=read_blob):
            return data_root
        blobs = datablobs.data_blobs(original, read_blob)
        if blobs and all(roots.find(digest) for digest in blobs):
            return data_root
        scratch = Path(tempfile.mkdtemp(prefix="repro-data-", dir=store.cache_dir))
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        fetched = dvc_data.fetch_inputs(original, scratch, data_root)
        drift = check_data(original.data.inputs, scratch, cache=cache, read_blob=read_blob)
    if drift:
        where = ", ".join(f"`{r}`" for r in fetched.remotes)
        raise DataDrift(
            drift.changed, drift.missing, drift.extra, what="the data DVC fetched",
            hint=f"the DVC remote {where} holds other bytes than the run read; push the recorded data again",
        )  # fmt: skip
    _say(fetched.describe(), notes, on_event)
    return fetched.root


def contain(record: Record, original: Record, network: bool) -> list[str]:
    """Apply what a replay decides itself, not the capsule: the network and the environment.

    Returns notes saying what the capsule asked for and did not get.
    """
    notes: list[str] = []
    record.backend.network = network
    if original.backend.network and not network:
        notes.append("the capsule asked for a network; the replay runs without one (pass --network to allow)")
    elif network:
        notes.append("the replay has a network (--network)")
    kept, dropped = allowed_env(original.determinism.env)
    record.determinism.env = kept
    if dropped:
        shown = ", ".join(dropped[:8]) + (f" (+{len(dropped) - 8} more)" if len(dropped) > 8 else "")
        notes.append(f"environment variables in the capsule that repro does not set were dropped: {shown}")
    return notes


def replay_record(original: Record, settings: Settings) -> Record:
    """The record of a replay: the original's inputs, a fresh id, this machine, no results."""
    record = rerun_record(original, settings)
    record.kind = "replay"
    record.parent = original.id
    return record


def rerun_record(original: Record, settings: Settings) -> Record:
    """A record to execute ``original``'s inputs again: a fresh id, this machine, no results.

    The one rule for what a re-execution (replay, resume) keeps of the record it starts from.
    """
    record = copy.deepcopy(original)
    record.id = new_run_id()
    record.created = now_iso()
    record.repro_version = __version__
    record.results = ResultInfo(output_excludes=list(original.results.output_excludes))
    record.warnings = []
    record.verification = None
    record.data.undeclared = []
    env, _ = host_env(Redactor(settings.secret_patterns), settings.env_allow)
    record.env = env
    record.deps.freeze = []
    record.deps.site_fingerprint = None
    record.backend.details = {}
    return record


def run_replay(
    request: ReplayRequest,
    store: Store,
    plan: Plan,
    on_event: OnEvent,
    *,
    code: CodeInfo | None = None,
    kind: str = "replay",
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
        _say(placement.note, notes, on_event)
    _refuse_hidden_secrets(original)
    data_root, data = _replay_data(request, loaded, plan.settings, store, capsule_blobs, notes, on_event)
    drift = data.drift
    window = None
    if request.from_checkpoint:
        window = windows.choose(original, request.from_checkpoint, request.steps, len(side(loaded).trace))
        notes.append(window.describe())
    record, variables = _new_record(request, original, plan.settings, notes, on_event)
    record.kind = kind
    if code is not None:
        record.code = code
    world_changed = _fit_world_size(request, original, record, notes)
    if request.ops:
        record.determinism.env[contract.OPS_ENV] = str(request.ops)
        if request.ops_only:
            record.determinism.env[contract.OPS_STOP_ENV] = "1"
            notes.append(f"recorded for its op stream: stopped after {plural(request.ops, 'optimizer step')}")
    run = _Execution(
        loaded, record, plan.settings, data_root, variables, notes, window, data, request.max_data_size,
        user_root=request.data_root is not None or not loaded.foreign,
    )  # fmt: skip
    root = run.execute(store, on_event, blob_path=store.blob_path if code is not None else None)
    _what_differed(original, record, notes, on_event)
    verdict = _compare(request, store, loaded, record, plan.settings, window, notes)
    if world_changed and verdict.status == "identical":
        verdict.status = "within_tolerance"  # another reduction order: identical bytes are luck
    verdict.notes += notes
    shutil.rmtree(root, ignore_errors=True)
    for note in notes:
        record.warn("replay_condition", note)
    record.verification = verification(verdict, original.id)
    store.seal(record, run.run_dir)
    if not request.ops_only:  # an execution cut short for its op stream has no verdict to report
        trackers.report_verdict(
            [original, record], verdict.status, store.root, lambda s: on_event(Event("info", s)),
            loaded.foreign,
        )  # fmt: skip
    recorded = ops.streams(original.results.logs, loaded.read_blob)  # the original ran with --ops
    if (request.ops or recorded) and not request.ops_only and verdict.status != "identical":
        _first_op(request, store, plan, on_event, kind, loaded, record, verdict)
    return ReplayOutcome(original, record, verdict, drift, notes)


def _first_op(
    request: ReplayRequest, store: Store, plan: Plan, on_event: OnEvent, kind: str, loaded: LoadedRun,
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
        fresh = store.load_run(run_replay(again, store, plan, on_event, kind=kind).replay.id)  # its own code
        theirs = ops.streams(fresh.record.results.logs, fresh.read_blob)
        store.remove_run(fresh.record.id)  # an execution cut short for its stream is no run of the store
        source = "a fresh execution of the original's command, cut short for its op stream (not kept)"
    replayed = store.load_run(record.id)
    ops.explain(verdict, theirs, ops.streams(replayed.record.results.logs, replayed.read_blob), steps, source)


def _say(note: str, notes: list[str], on_event: OnEvent) -> None:
    """Tell a condition of the replay now, and keep it for the verdict."""
    on_event(Event("info", note))
    notes.append(note)


def _replayable(request: ReplayRequest, store: Store, on_event: OnEvent) -> tuple[LoadedRun, Path | None]:
    """The run the request names, in the store, with a command to replay; and where the blobs of a
    capsule file were extracted (its carried data among them), None for a run of the store.

    Raises:
        UsageError: a run captured in-process; an ``--env`` name no record may set.
        NotFoundError, CapsuleInvalid: see `resolve_trusted`.
    """
    loaded = resolve_trusted(store, request.ref, request.trust, on_event)
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


@dataclass
class DataChoice:
    """Where each declared input of a replay comes from (`choose_data`)."""

    sources: list[InputSource] = field(default_factory=list)
    drift: Drift | None = None  # the host's data differs and nothing carried replaces it (allowed)
    roots: datablobs.BlobRoots = field(default_factory=lambda: datablobs.BlobRoots(()))

    @property
    def placed(self) -> bool:
        """Whether the inputs are placed into the replay's copy (some come from blobs)."""
        return self.drift is None and any(s.kind in CARRIED for s in self.sources)

    def notes(self) -> list[str]:
        """What the replay says about the data it uses instead of the host's."""
        if not self.placed:
            return []
        return [
            f"declared data {s.path}: the host's copy {'differs' if s.present else 'is absent'}; the replay "
            f"uses the copy {_FROM[s.kind]}, placed read-only in its own copy of the project "
            "(the host's data is left as it is)"
            for s in self.sources
            if s.kind in CARRIED
        ]

    def shown(self, user_root: bool) -> tuple[list[str], list[str]]:
        """The declared inputs a replay reading the host's data shows its command, and one note per
        input it does not (`repro.facts.hostpaths`): an input as recorded, or one from the data root
        the user named (``user_root``); never a private location, whatever its content."""
        shown: list[str] = []
        withheld: list[str] = []
        for s in self.sources:
            if s.refused is not None:
                withheld.append(f"declared data {s.path} is not shown to the replay: {s.refused}")
            elif s.kind == HERE or (user_root and s.present):
                shown.append(s.path)
            elif s.present:
                withheld.append(
                    f"declared data {s.path} differs from the record and is not shown to the replay: "
                    "data that differs from a run from elsewhere is shown only from a directory you name "
                    "with --data-root"
                )
        return shown, withheld


_FROM = {CAPSULE: "carried in the capsule", STORE: "kept in the store", DATA_REMOTE: "in the data remote"}


def choose_data(
    original: Record,
    data_root: Path,
    store: Store,
    roots: datablobs.BlobRoots,
    request: ReplayRequest,
    read_blob: Callable[[str], bytes | None],
) -> DataChoice:
    """Decide where each declared input comes from: the host's data where it is as recorded, else
    the blobs carried in the capsule, kept in the store or in the data remote; when an input is found
    nowhere, the host's data as before (drift stops the replay unless allowed).

    Raises:
        DataDrift: an input differs, no blobs replace it, and drift is not allowed.
        UsageError: the data to place is over ``request.max_data_size``.
        CapsuleInvalid: a manifest blob is missing or malformed.
    """
    if not original.data.inputs:
        return DataChoice()
    with HashCache(store.cache_dir / "hashes.sqlite") as cache:
        sources = locate_inputs(original, data_root, roots, read_blob, cache)
    _refuse_missing_read(original, sources, request)
    if any(s.kind in (NOWHERE, DVC) for s in sources):  # DVC: not fetched (--data-root, drift allowed)
        drift = check_recorded_data(original, data_root, store, request.allow_data_drift, read_blob)
        return DataChoice(sources, drift, roots)
    choice = DataChoice(sources, None, roots)
    if choice.placed:
        datablobs.check_size(sum(s.size for s in sources), request.max_data_size, "--max-data-size")
    return choice


def _refuse_missing_read(original: Record, sources: list[InputSource], request: ReplayRequest) -> None:
    """Raises: DataUnavailable: a file the run read (not declared) is neither here as recorded nor
    kept anywhere, and drift is not allowed: named before anything runs, with how to supply it."""
    read = {item.path for item in original.data.inputs if item.read}
    missing = [s for s in sources if s.kind == NOWHERE and s.path in read]
    if not missing or request.allow_data_drift:
        return
    first = missing[0]
    state = "differs here" if first.present else "is absent here"
    more = (
        f" (and {len(missing) - 1} more: {', '.join(s.path for s in missing[1:4])})"
        if len(missing) > 1
        else ""
    )
    raise DataUnavailable(
        f"the run read {first.path} (not declared data), it {state}{more}, and no copy is kept here (over "
        "store.max_input_bytes when it ran, or a capsule exported without --with-data)",
        hint=f"put the recorded {first.path} back in the project, or export the run with --with-data where "
        f"it is and replay that capsule; declare it with --data {first.path} when you run",
    )


def _keep_carried(
    data: DataChoice, original: Record, read_blob: Callable[[str], bytes | None], into: Path
) -> None:
    """Keep the data a capsule carried, by hash, where the next replay of the run finds it: the data
    remote when there is one, else the store (a hard link where the file systems allow)."""
    if not data.placed:
        return
    for digest in sorted(datablobs.data_blobs(original, read_blob)):
        found = data.roots.find(digest)
        if found is None or found[0] != CAPSULE:
            continue
        try:
            datablobs.put(found[1], digest, into)
        except OSError as e:
            raise from_os_error(e, into) from e


def _place_data(
    data: DataChoice,
    original: Record,
    data_root: Path,
    root: Path,
    read_blob: Callable[[str], bytes | None],
    limit: int,
) -> None:
    """Write every declared input at its recorded path in the replay's copy of the project ``root``:
    from blobs where the host's copy differs or is absent, from the host where it is as recorded;
    each file checked against the record's manifest.

    Raises:
        CapsuleInvalid: an unsafe path, a blob or file that does not match the manifest, data over
            the size limit.
    """
    kinds = {s.path: s.kind for s in data.sources}
    for item, files in datablobs.inputs_files(original, read_blob):
        entries = datablobs.safe_entries(item, files)
        datablobs.clear(root, item.path)
        from_blobs = kinds.get(item.path) != HERE

        def source_of(entry: FileEntry, from_blobs: bool = from_blobs) -> Path:
            if not from_blobs:
                return data_root / entry.path
            found = data.roots.find(entry.hash)
            if found is None:
                raise CapsuleInvalid(f"data file {entry.path} is not kept as a blob")
            return found[1]

        datablobs.place(entries, root, source_of, limit)


def _refuse_hidden_secrets(original: Record) -> None:
    """Raises: UsageError: the recorded command hides secret values, so it is not what ran."""
    hidden = redacted_options(original.command.argv)
    if hidden:
        raise UsageError(
            f"the recorded command hides secret values ({', '.join(hidden)} recorded as {REDACTED}); "
            "it cannot be replayed as recorded",
            hint="record the run again with secrets passed through environment variables, "
            "which the run inherits and the record never keeps",
        )


def _new_record(
    request: ReplayRequest, original: Record, settings: Settings, notes: list[str], on_event: OnEvent
) -> tuple[Record, dict[str, str]]:
    """The replay's record, contained (`contain`), with the recorded variables it sets again;
    what it does not get, and what to expect of this machine's GPUs and the mode, is said."""
    record = replay_record(original, settings)
    contained = contain(record, original, request.network)
    passed = command_env.select(original.env.variables, request.env, settings.env_allow)
    record.env.variables.update(passed.env)
    contained += passed.notes(os.environ)
    for name in command_env.unknown(request.env, original.env.variables):
        contained.append(f"--env {name}: the record holds no such variable")
    for note in contained:
        _say(note, notes, on_event)
    if uses_gpu(original):
        _say(gpu_hardware_note(original.env, record.env), notes, on_event)
    expect = expectation(original.determinism)
    if expect:
        _say(expect, notes, on_event)
    _fit_threads(request, original, record, notes, on_event)
    return record, passed.env


def _fit_threads(
    request: ReplayRequest, original: Record, record: Record, notes: list[str], on_event: OnEvent
) -> None:
    """Replay at the thread count asked for (``--threads``), said in the verdict's notes; without it,
    at the recorded one, and a ``REPRO_THREADS`` of this shell is said to be ignored.

    Raises:
        UsageError: --threads for a run whose mode pins no thread count (off).
    """
    recorded = original.determinism.threads
    if request.threads is None:
        given = os.environ.get(contract.THREADS_ENV)
        if given is not None and recorded is not None:
            said = f"{contract.THREADS_ENV}={given} is ignored: a replay runs at the recorded "
            on_event(
                Event("info", said + f"{plural(recorded, 'thread')} (--threads N replays at another count)")
            )
        return
    if recorded is None:
        raise UsageError(
            f"run {original.id} ran in {original.determinism.mode} mode, which pins no thread count",
            hint="--threads applies to strict and gpu mode replays",
        )
    record.determinism = with_threads(record.determinism, request.threads)
    if request.threads != recorded:
        _say(
            f"thread count differs: the replay ran at {plural(request.threads, 'intra-op thread')}, the "
            f"original at {recorded} (--threads)",
            notes, on_event,
        )  # fmt: skip


def _fit_world_size(request: ReplayRequest, original: Record, record: Record, notes: list[str]) -> bool:
    """Replay with the process count asked for; whether it changed the world size.

    Raises:
        UsageError: another process count without --allow-world-size-change.
    """
    nproc = original.command.nproc_per_node
    asked = request.nproc_per_node or nproc
    if asked == nproc:
        return False
    if not request.allow_world_size_change:
        raise UsageError(
            f"the run used {nproc} process(es); replaying with {asked} changes the result",
            hint="pass --allow-world-size-change to do it anyway (then within_tolerance at best)",
        )
    notes.append(f"world size changed: {nproc} → {asked}")
    record.command.nproc_per_node = asked
    return True


@dataclass
class _Execution:
    """The replay's run: its code restored beside it, started like every run (`repro.start`)."""

    loaded: LoadedRun
    record: Record
    settings: Settings
    data_root: Path
    variables: dict[str, str]  # the recorded variables set again
    notes: list[str]
    window: windows.Window | None
    data: DataChoice = field(default_factory=DataChoice)
    max_data: int = limits.MAX_DATA_BYTES
    # The data root is one the user chose: named with --data-root, or the project of a run this store
    # made itself (a run from elsewhere, a capsule, never chooses which host paths differ).
    user_root: bool = False
    run_dir: Path = field(init=False)

    def execute(self, store: Store, on_event: OnEvent, blob_path: Callable[[str], Path] | None) -> Path:
        """Restore the code beside the run and execute it; returns the restored code's directory.

        ``blob_path``: where other code's files are (`check --against`), else the recorded run's.
        """
        original, record = self.loaded.record, self.record
        self.run_dir = store.begin_run(record.id, record.command.argv)
        if self.loaded.foreign:
            store.mark_foreign(record.id, f"made from {original.id}, a run from elsewhere")
        wanted = self.settings.backend
        try:
            root = _restore(record, blob_path or self.loaded.blob_path, self.run_dir, self.notes)
            if self.data.placed:
                _place_data(self.data, original, self.data_root, root, self.loaded.read_blob, self.max_data)
                self.data_root = root
            prepared = self._prepare(root)
            where = start.Start(wanted, registry.recorded_options(wanted, original))
        except BaseException:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            raise
        shown_mode = record.determinism.mode
        if original.determinism.applied is False:
            shown_mode += " (not applied in the original: the repro runtime did not load)"
        start.execute(
            prepared, where, store, on_event, head=f"replaying {original.id} as {record.id}",
            mode=shown_mode, ready=lambda backend: self._ready(backend, prepared.spec),
        )  # fmt: skip
        return root

    def _prepare(self, root: Path) -> Prepared:
        """The run as a backend executes it: the recorded command, data, outputs and lockfile."""
        original, record, settings = self.loaded.record, self.record, self.settings
        lockfile = start.restore_lockfile(original, self.loaded.read_blob, self.run_dir)
        outputs = list(original.results.output_roots) or ["outputs"]
        data = [item.path for item in original.data.inputs]
        if not self.data.placed:  # the host's data: only what `DataChoice.shown` allows
            data, withheld = self.data.shown(self.user_root)
            self.notes.extend(withheld)
        spec = build_spec(
            record, root, self.run_dir, data, outputs, lockfile, settings.base_image,
            original.command.executed(), data_root=self.data_root, variables=self.variables,
            cuda_index=settings.cuda_index,
        )  # fmt: skip
        spec.terminal = Terminal.recorded(original.backend.details)  # a TTY where the original had one
        if self.window is not None:
            windows.prepare(self.window, spec, original, self.loaded.read_blob)
        _carry_image(spec, original, self.loaded)
        _fit_layout(record, settings.backend, self.notes)
        spec.nproc_per_node = record.command.nproc_per_node
        tree = snapshot_tree(root, data)
        return Prepared(
            record, spec, self.run_dir, {}, settings, tree_before=tree, foreign=self.loaded.foreign
        )

    def _ready(self, backend: Backend, spec: RunSpec) -> list[str]:
        """Fit the replay to the chosen backend: where its MLflow runs go (said after the status line)."""
        original = self.loaded.record
        if backend.name != original.backend.name:
            self.notes.append(f"backend changed: {original.backend.name} → {backend.name}")
        self.record.backend.requested = self.settings.backend
        tracking, where = mlflow_stores.replay_environment(
            original.results.trackers, backend.name, self.loaded.foreign
        )
        spec.env.update(tracking)  # the host's store, never one the capsule names
        return [where] if where else []


def _what_differed(original: Record, record: Record, notes: list[str], on_event: OnEvent) -> None:
    """Note how the replay's environment differed from the original's: image base, packages, CPU, CUDA."""
    gone = mlflow_stores.left_in_copy(record.results.trackers)
    if gone:
        notes.append(gone)
    other_base = base_note(original.deps.image, record.deps.image)
    if other_base:
        _say(other_base, notes, on_event)
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
        return windows.compare(side(loaded), side(replayed), window, mode, tol, options)
    if original.resumed_from:
        notes.append(resumed_note(store, original))
        return compare_runs(outputs_only(side(loaded)), outputs_only(side(replayed)), mode, tol, options)
    return compare_runs(side(loaded), side(replayed), mode, tol, options)


def base_note(recorded: ImageInfo | None, built: ImageInfo | None) -> str | None:
    """One line when a rebuilt image stands on another base than the recorded one.

    The base of a replay's image is this host's (``image.base``), never the one a record names:
    a capsule does not choose which local image a build starts from. When the two differ, the
    environment differs, and the verdict may too.
    """
    if not (recorded and built and recorded.base_id and built.base_id) or built.loaded:
        return None
    if recorded.base_id == built.base_id:
        return None
    return (
        f"the recorded image was built on base {recorded.base_id[:19]} ({recorded.base or 'unnamed'}); "
        f"this host's image.base {built.base} is {built.base_id[:19]}: the environment differs "
        "and the verdict may too"
    )


def resolve_trusted(store: Store, ref: str, trust: signing.Trust | None, on_event: OnEvent) -> LoadedRun:
    """The run ``ref`` names; with ``trust``, a capsule file whose signature passes, checked before
    anything is extracted (reported through ``on_event``), and the same SHA256SUMS found again when it is.

    Raises:
        UsageError: ``trust`` for a ref that is not a capsule file.
        CapsuleInvalid: the signature fails ``trust``, or the file changed in between.
    """
    if trust is None:
        return store.resolve(ref)
    path = Path(ref)
    if not (ref.endswith(".tar") or path.is_file()):
        raise UsageError(
            f"--key and --require-signed check an exported capsule; {ref} is a run in the store",
            hint=f"replay the capsule file itself (`repro export {ref} --sign KEYFILE` makes one)",
        )
    seal = signing.check_capsule(path, trust)
    said = f"signed with key {seal.key_id}, signature checked" if seal.checked else "not signed"
    on_event(Event("info", f"{path.name}: {said}"))
    loaded = store.open_capsule(path)
    if loaded.sums_sha256 != seal.sums_sha256:
        raise CapsuleInvalid(f"{path.name} changed while it was being read", hint="replay it again")
    return loaded


def outputs_only(s: Side) -> Side:
    """A resumed run logged only what followed its checkpoint: its outputs are what compare."""
    return dataclasses.replace(s, metrics=[], stdout="", trace=[], data_order={})


def resumed_note(store: Store, record: Record) -> str:
    """How a resumed run is replayed: its whole chain as one uninterrupted run."""
    chain = [record.id]
    ref = record.resumed_from
    while ref and ref not in chain and len(chain) < 1000:
        chain.insert(0, ref)
        try:  # a run of this store by its id: never a path the record names (`Store.resolve` opens files)
            ref = store.load_run(ref, lists=()).record.resumed_from
        except ReproError:
            break
    return (
        f"run {record.id} resumed an interrupted run: replayed as one uninterrupted run of its chain "
        f"({' → '.join(chain)}); outputs compared, not its logs"
    )


def _fit_layout(record: Record, backend: str, notes: list[str]) -> None:
    """A multi-node run replayed on one machine: the same world size, as processes of one torchrun.

    Ranks, per-rank seeds and the process group are the same; only where the ranks run changes.
    """
    nodes, nproc = record.command.nodes, record.command.nproc_per_node
    if nodes <= 1 or registry.spans_nodes(backend):
        return
    record.command.nodes, record.command.nproc_per_node = 1, nodes * nproc
    notes.append(
        f"layout changed: {nodes} nodes × {nproc} process(es) → {nodes * nproc} processes on one machine"
    )


def _restore(record: Record, blob_path: Callable[[str], Path], run_dir: Path, notes: list[str]) -> Path:
    """Write the record's code into a scratch directory next to the run."""
    original = record
    dest = RunDir(run_dir).code
    dest.mkdir(parents=True, exist_ok=True)
    missing = restore_code(original.code, blob_path, dest)
    script = next((a for a in original.command.argv[1:] if a.endswith(".py")), None)
    if script and script in missing:
        raise UsageError(f"the script {script} was not stored in the capsule; it cannot be replayed")
    if missing:
        notes.append(
            f"{plural(len(missing), 'code file')} were not stored and are absent: {', '.join(missing[:5])}"
        )
    (dest / original.command.cwd).mkdir(parents=True, exist_ok=True)
    return dest


def _carry_image(spec: RunSpec, original: Record, loaded: LoadedRun) -> None:
    """Replay in the very image a capsule carries (loaded when the engine lacks it, never rebuilt)."""
    image = original.deps.image
    if loaded.image_archive is None or image is None or not image.id:
        return
    spec.recorded_image = BuiltImage(
        id=image.id,
        tag=image.tag or image.id,
        base=image.base or "",
        base_id=image.base_id or "",
        template=image.template or "",
        dockerfile_text=(loaded.read_blob(image.dockerfile) or b"").decode(),
        reused=image.reused,
        build_seconds=image.build_seconds or 0.0,
    )
    spec.image_archive = functools.partial(open_member, loaded.image_archive, IMAGE_MEMBER)
