"""Re-execution of a recorded run: its record for this machine (contained, fitted to the threads,
world size and layout asked for), its code and image restored, started like every run, and the notes
said about this machine (GPUs, image base)."""

from __future__ import annotations

import copy
import functools
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from repro import __version__, start
from repro import window as windows
from repro.backends import registry
from repro.backends.base import Backend, BuiltImage, Event, OnEvent, RunSpec, Terminal
from repro.collect.attribution import snapshot_tree
from repro.config import Settings
from repro.errors import UsageError
from repro.facts import command_env
from repro.facts.code import restore_code
from repro.facts.cpus import usable_cpus
from repro.facts.determinism import allowed_env, expectation, with_threads
from repro.facts.env import host_env
from repro.facts.secrets import REDACTED, Redactor, redacted_options
from repro.integrations import mlflow as mlflow_stores
from repro.rerun.inputs import DataChoice, place_data
from repro.rerun.request import ReplayRequest, say
from repro.run.execute import build_spec
from repro.run.prepared import Prepared, now_iso
from repro.runtime import contract
from repro.store import limits
from repro.store.capsule import IMAGE_MEMBER
from repro.store.record import EnvInfo, ImageInfo, Record, ResultInfo
from repro.store.rundir import RunDir
from repro.store.runs import LoadedRun, Store, new_run_id
from repro.store.verify import open_member
from repro.units import plural


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


def refuse_hidden_secrets(original: Record) -> None:
    """Raises: UsageError: the recorded command hides secret values, so it is not what ran."""
    hidden = redacted_options(original.command.argv)
    if hidden:
        raise UsageError(
            f"the recorded command hides secret values ({', '.join(hidden)} recorded as {REDACTED}); "
            "it cannot be replayed as recorded",
            hint="record the run again with secrets passed through environment variables, "
            "which the run inherits and the record never keeps",
        )


def new_record(
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
        say(note, notes, on_event)
    if uses_gpu(original):
        say(gpu_hardware_note(original.env, record.env), notes, on_event)
    expect = expectation(original.determinism)
    if expect:
        say(expect, notes, on_event)
    _fit_threads(request, original, record, notes, on_event, settings.backend)
    return record, passed.env


def _fit_threads(
    request: ReplayRequest,
    original: Record,
    record: Record,
    notes: list[str],
    on_event: OnEvent,
    backend: str,
) -> None:
    """Replay at the thread count asked for (``--threads``), said in the verdict's notes; without it,
    at the recorded one, and a ``REPRO_THREADS`` of this shell is said to be ignored, as is a replay on
    ``backend`` here with fewer CPUs than the recorded threads (slower, same bits).

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
        if recorded is not None:
            _say_fewer_cpus(recorded, original.command.nproc_per_node, backend, on_event)
        return
    if recorded is None:
        raise UsageError(
            f"run {original.id} ran in {original.determinism.mode} mode, which pins no thread count",
            hint="--threads applies to strict and gpu mode replays",
        )
    record.determinism = with_threads(record.determinism, request.threads)
    if request.threads != recorded:
        say(
            f"thread count differs: the replay ran at {plural(request.threads, 'intra-op thread')}, the "
            f"original at {recorded} (--threads)",
            notes, on_event,
        )  # fmt: skip


def _say_fewer_cpus(recorded: int, per_node: int, backend: str, on_event: OnEvent) -> None:
    """One line when this machine gives the replay's processes fewer CPUs than the recorded threads:
    the count stays (it is part of the bits), the replay is slower."""
    if not registry.cpus_here(backend):
        return
    usable = usable_cpus()
    if recorded * per_node > usable:
        on_event(Event("info", f"the run ran at {plural(recorded, 'intra-op thread')}{_ranks(per_node)} and "
                               f"this machine lets the replay use {plural(usable, 'CPU')}: it keeps "
                               f"{recorded} (the same bits) and will be slower"))  # fmt: skip


def _ranks(per_node: int) -> str:
    return f" in each of {per_node} processes" if per_node > 1 else ""


def fit_world_size(request: ReplayRequest, original: Record, record: Record, notes: list[str]) -> bool:
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
class Execution:
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
    # What a resume adds to the prepared run before it starts (its checkpoints placed, its RNG
    # states seeded: `repro.resume`), and the line that starts it.
    setup: Callable[[Path, Prepared], None] | None = None
    head: str = "replaying"
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
                place_data(self.data, original, self.data_root, root, self.loaded.read_blob, self.max_data)
                self.data_root = root
            prepared = self._prepare(root)
            if self.setup is not None:
                self.setup(root, prepared)
            where = start.Start(wanted, registry.recorded_options(wanted, original, self.loaded.foreign))
        except BaseException:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            raise
        shown_mode = record.determinism.mode
        if original.determinism.applied is False:
            shown_mode += " (not applied in the original: the repro runtime did not load)"
        start.execute(
            prepared, where, store, on_event, head=f"{self.head} {original.id} as {record.id}",
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
            record, root, self.run_dir, data, outputs, original.command.executed(),
            data_root=self.data_root, variables=self.variables,
        )  # fmt: skip
        spec.terminal = Terminal.recorded(original.backend.details)  # a TTY where the original had one
        if self.window is not None:
            windows.prepare(self.window, spec, original, self.loaded.read_blob)
        _fit_layout(record, settings.backend, self.notes)
        spec.nproc_per_node = record.command.nproc_per_node
        tree = snapshot_tree(root, data)
        prepared = Prepared(
            record, spec, self.run_dir, {}, settings, tree_before=tree, foreign=self.loaded.foreign,
            lockfile=lockfile,
        )  # fmt: skip
        _carry_image(prepared, original, self.loaded)
        return prepared

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


def _carry_image(prepared: Prepared, original: Record, loaded: LoadedRun) -> None:
    """Replay in the very image a capsule carries (loaded when the engine lacks it, never rebuilt)."""
    image = original.deps.image
    if loaded.image_archive is None or image is None or not image.id:
        return
    prepared.recorded_image = BuiltImage(
        id=image.id,
        tag=image.tag or image.id,
        base=image.base or "",
        base_id=image.base_id or "",
        template=image.template or "",
        dockerfile_text=(loaded.read_blob(image.dockerfile) or b"").decode(),
        reused=image.reused,
        build_seconds=image.build_seconds or 0.0,
    )
    prepared.image_archive = functools.partial(open_member, loaded.image_archive, IMAGE_MEMBER)
