"""`repro run`: capture → build or reuse the environment → execute → collect → seal.

Core only: returns the sealed record; the CLI decides what to print and the exit code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repro import __version__
from repro.backends import buildlog, registry
from repro.backends.base import (
    RANK_LOGS,
    Backend,
    BuiltImage,
    Event,
    OnEvent,
    RunResult,
    RunSpec,
    terminal_of,
)
from repro.backends.buildlog import BuildLog
from repro.collect import attribution, checkpoints, harvest, produced, sealmask
from repro.collect.reports import Reports, ledger, read_reports
from repro.compare import dataorder
from repro.compare import ops as op_streams
from repro.compare.trace import TRACE_LOG
from repro.config import Plan, Settings
from repro.errors import BuildError, NotFoundError, UsageError
from repro.facts import code as code_capture
from repro.facts import command as cmd
from repro.facts import command_env, deps, hydra, inputs
from repro.facts.cudawheels import cuda_in_cpu_lock
from repro.facts.data import capture_data
from repro.facts.determinism import (
    check_gpu_mode,
    explain_failure,
    plan,
    resolve_isa,
    run_environment,
    source_date_epoch,
    state_warnings,
)
from repro.facts.env import host_env
from repro.facts.lockfile import mismatches
from repro.facts.secrets import Masker, Redactor, config_bytes_secrets, redacted_options, run_masker
from repro.facts.secrets.verdicts import VERDICTS_DB, Verdicts
from repro.facts.seeds import make_seeds
from repro.fetch.locate import cached_pylock
from repro.integrations import trackers
from repro.runtime import contract
from repro.store import budget, limits
from repro.store import images as store_images
from repro.store.capsule import (
    BackendInfo,
    CommandInfo,
    EnvInfo,
    FileEntry,
    ImageInfo,
    Record,
    RunWarning,
    SharedWrite,
)
from repro.store.hashing import HashCache
from repro.store.rundir import RunDir
from repro.store.runs import LoadedRun, Store, new_run_id
from repro.units import human_bytes, plural

if TYPE_CHECKING:
    from repro.backends.slurm import SlurmBackend, SlurmOptions


@dataclass
class RunRequest:
    """The command to run and where; every setting comes from the `Plan`.

    ``injected`` are arguments repro appends to the user's command (Hydra's pinned run directory):
    run with it, recorded apart from it (`CommandInfo.injected`).
    """

    argv: list[str]
    cwd: Path
    injected: list[str] = field(default_factory=list)


@dataclass
class Prepared:
    """A captured record plus what executing it needs."""

    record: Record
    spec: RunSpec
    run_dir: Path
    outputs_before: dict[str, tuple[int, int, int]]
    settings: Settings
    started_ns: int = 0  # when the run began: files other runs claim after this are theirs
    tree_before: dict[str, tuple[int, int, int]] | None = None  # the project's files, for unwatched runs
    lock: deps.PendingLock | None = None  # None: the spec's lockfile is final (a replay)
    masker: Masker | None = None  # None: secrets of this process's environment only
    foreign: bool = False  # made from a run from elsewhere (repro/sandbox.py): host tracking URIs only


ProgressFactory = Callable[[str], Callable[[int, int], None] | None]


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def slurm_options(settings: Settings) -> SlurmOptions:
    """The Slurm allocation the settings (repro.yaml, flags) ask for."""
    from repro.backends.slurm import SlurmOptions

    return SlurmOptions.from_settings(settings.section("slurm"))


def select_backend(
    name: str,
    on_event: OnEvent,
    need_lock: bool = True,
    slurm: SlurmOptions | None = None,
    base_image: str | None = None,
) -> Backend:
    """The backend called ``name`` (`repro.backends.registry`), given ``slurm`` when it takes options;
    `auto`: docker when an engine answers (and dependencies are declared, and the engine holds
    ``base_image`` when one is named), else local, said in one line.

    A missing base image is never made here: that takes root, debootstrap and minutes
    (`repro base-image`, which the CI recipes run explicitly).

    Raises:
        BackendUnavailable: `docker` asked for and no engine answers.
    """
    if name == registry.AUTO:
        name = registry.auto(on_event, need_lock, base_image)
    return registry.get(name).make(slurm)


def launch(request: RunRequest, run_plan: Plan) -> tuple[list[str], int, bool, list[str]]:
    """The command, process count and whether torchrun launches it: `torchrun … script.py` on the
    command line is read as `--nproc-per-node`.

    Raises:
        UsageError: a torchrun line repro cannot run as one node, or a process count that
            contradicts `--nproc-per-node`.
    """
    argv = [*cmd.normalise_argv(request.argv), *request.injected]
    torchrun = cmd.parse_torchrun(argv)
    if torchrun is None:
        return argv, run_plan.nproc_per_node, run_plan.torchrun, []
    if run_plan.torchrun and run_plan.nproc_per_node != torchrun.nproc_per_node:
        raise UsageError(
            f"--nproc-per-node {run_plan.nproc_per_node} and torchrun --nproc-per-node "
            f"{torchrun.nproc_per_node} disagree",
            hint="give the process count once",
        )
    notes = []
    if torchrun.ignored:
        notes.append(f"torchrun options left to repro's single-node launcher: {' '.join(torchrun.ignored)}")
    return torchrun.argv, torchrun.nproc_per_node, True, notes


def expand(request: RunRequest, run_plan: Plan) -> list[RunRequest]:
    """The runs a request stands for, each as it will be recorded.

    A Hydra multirun (`-m a=1,2`) is one run per job; a Hydra app gets its run directory
    pinned (`hydra.run.dir=…`, in ``injected``), so every run of a `repro check` and every
    replay write where the first run wrote. Other commands, and a request already expanded,
    come back unchanged.

    Raises:
        UsageError: see `launch`; a multirun whose overrides Hydra rejects.
    """
    if request.injected:
        return [request]
    launched, _, _, _ = launch(request, run_plan)
    args = cmd.script_args(launched)
    # The script's arguments end the command whether torchrun launches it or python does.
    original = cmd.normalise_argv(request.argv)
    head = original[: len(original) - len(args)]
    now = datetime.now()
    jobs = hydra.sweep_jobs(args, now)
    if jobs is not None:
        return [
            dataclasses.replace(request, argv=[*head, *hydra.job_argv(args, job)], injected=job.injected)
            for job in jobs
        ]
    script = cmd.script_path(launched)
    path = request.cwd / script if script else None
    text = path.read_text("utf-8", "replace") if path is not None and path.is_file() else None
    if not hydra.is_hydra_app(text, args):
        return [request]
    return [dataclasses.replace(request, injected=hydra.pin_run_dir(args, now))]


def capture(
    request: RunRequest,
    run_plan: Plan,
    store: Store,
    on_event: OnEvent,
    progress: ProgressFactory | None = None,
) -> Prepared:
    """Record everything that decides the run, and make the run directory.

    Raises:
        UsageError: no command, a cwd outside the project, bad options.
        NotFoundError: declared data missing.
        BuildError: the lockfile could not be compiled.
    """
    root = store.root
    cwd, argv, nproc, torchrun, notes = _command(request, run_plan, root)
    settings = run_plan.settings
    data = list(settings.data)
    outputs = [_inside(root, rel, "output directory") for rel in settings.outputs]
    redactor = Redactor(settings.secret_patterns)
    env, env_hits = host_env(redactor, settings.env_allow)
    check_gpu_mode(run_plan.mode, run_plan.gpus, len(env.gpus), settings.backend, run_plan.source("mode"))
    safe_argv, argv_hits = redactor.argv(argv)
    hidden = redacted_options(safe_argv)
    if hidden:
        on_event(Event("info", f"secret values of {', '.join(hidden)} are recorded as *** (the record "
                               "keeps no secret); a replay will refuse the command: pass secrets "
                               "through environment variables to keep it replayable"))  # fmt: skip
    configs = cmd.config_files(cmd.script_args(argv), cwd, root)
    masker = run_masker(dict(os.environ), argv, configs, redactor)

    record = Record(id=new_run_id(), created=now_iso(), project=root.name, repro_version=__version__)
    nodes = settings.slurm_nodes if settings.backend == "slurm" else 1
    rel_cwd = cwd.relative_to(root)
    record.command = _command_info(request, rel_cwd, argv, safe_argv, masker, nproc, torchrun, nodes)
    record.redactions += argv_hits
    if torchrun and cmd.parse_torchrun(request.argv) is not None:  # recorded as typed, run as launched
        typed, typed_hits = redactor.argv(list(request.argv))
        record.command.launch, record.command.argv = record.command.argv, typed
        record.redactions += [hit for hit in typed_hits if hit not in record.redactions]
    for note in notes:
        record.warn("torchrun_options_ignored", note)
    masker = _capture_files(record, store, settings, configs, [*data, *outputs], masker, progress)
    lock = _start_lock(root, cwd, run_plan, on_event)
    _say_lock_uncommitted(store, lock, on_event)
    _capture_environment(record, run_plan, env, env_hits, nproc * nodes)

    record.results.output_excludes = list(settings.outputs_exclude)
    run_dir = store.begin_run(record.id, record.command.argv)
    variables = command_env.select(record.env.variables, allowed=settings.env_allow).env
    spec = build_spec(
        record, root, run_dir, data, outputs, None, settings.base_image, argv, variables=variables,
        cuda_index=settings.cuda_index,
    )  # fmt: skip
    started = time.time_ns()
    tree = attribution.snapshot_tree(root, data)
    before = attribution.snapshot(root, outputs)
    return Prepared(record, spec, run_dir, before, settings, started, tree, lock=lock, masker=masker)


def _command(request: RunRequest, run_plan: Plan, root: Path) -> tuple[Path, list[str], int, bool, list[str]]:
    """Where the command runs and how it launches (`launch`): its directory, argv, process count,
    whether torchrun launches it, and notes on the torchrun options repro leaves out.

    Raises:
        UsageError: no command, a cwd outside the project, a torchrun line repro cannot run.
        NotFoundError: the script is not there.
    """
    if not request.argv:
        raise UsageError(
            "no command to run", hint="repro run -- python train.py --lr 0.1   (or: repro run train.py)"
        )
    cwd = request.cwd.resolve()
    if not cwd.is_relative_to(root):
        raise UsageError(f"the working directory {cwd} is outside the project {root}")
    argv, nproc, torchrun, notes = launch(request, run_plan)
    script = cmd.script_path(argv)
    if script is not None and not (cwd / script).is_file():
        raise NotFoundError(
            f"no script {script!r} in {cwd}",
            hint="check the path; it is relative to the directory repro runs in",
        )
    return cwd, argv, nproc, torchrun, notes


def _command_info(
    request: RunRequest, rel_cwd: Path, argv: list[str], safe_argv: list[str], masker: Masker, nproc: int,
    torchrun: bool, nodes: int,
) -> CommandInfo:  # fmt: skip
    """The command as recorded: the user's arguments (secrets as ***) apart from repro's, its parameters."""
    injected = list(request.injected)  # the last arguments: repro's, not the user's
    args = cmd.script_args(argv)[: len(cmd.script_args(argv)) - len(injected)]
    return CommandInfo(
        argv=safe_argv[: len(safe_argv) - len(injected)],
        injected=injected,
        cwd=rel_cwd.as_posix() or ".",
        params=masker.obj(cmd.parse_params(args), "params"),
        nproc_per_node=nproc,
        torchrun=torchrun,
        nodes=nodes,
    )


def _capture_files(
    record: Record,
    store: Store,
    settings: Settings,
    configs: list[Path],
    not_code: list[str],
    masker: Masker,
    progress: ProgressFactory | None,
) -> Masker:
    """Store the config files, the code snapshot (masked; without ``not_code``: data and outputs) and
    the data manifest; returns the masker with the credentials found in the code added."""
    root = store.root
    store.ensure()
    with HashCache(store.cache_dir / "hashes.sqlite") as cache:
        for path in configs:
            rel = path.relative_to(root).as_posix()
            raw = masker.data(path.read_bytes(), f"config file {rel}", printed=False)
            record.command.config_files.append(FileEntry(rel, len(raw), store.put_bytes(raw), True))
        with Verdicts(store.cache_dir / VERDICTS_DB, settings.secret_patterns) as verdicts:
            put = code_capture.MaskedPut(store, masker, root, verdicts)
            code = code_capture.capture_code(
                root, put, exclude=[*not_code, deps.LOCK_DIR], cache=cache,
                max_file_bytes=settings.max_code_file_bytes, earlier_writers=store.earlier_writers,
                credential=put.credential,
            )  # fmt: skip
        masker = masker.add(put.found)  # a config's credential printed by the run is masked too
        code.patch = masker.text(code.patch, "the uncommitted patch", printed=False)
        code_capture.store_patch(code, store.put_bytes)
        record.code = code.info
        record.warnings += code.warnings
        record.data.inputs = capture_data(
            list(settings.data), root, cache=cache,
            on_progress=progress("hashing data") if progress else None, put_bytes=store.put_bytes,
        )  # fmt: skip
    return masker


def _start_lock(root: Path, cwd: Path, run_plan: Plan, on_event: OnEvent) -> deps.PendingLock:
    """The lock of the project's requirements (deps.requirements, else those of the folder the command
    runs from, else the root's), compiled in the background while the run goes on."""
    settings = run_plan.settings
    variant = lock_variant(settings, run_plan.gpus)
    configured = settings.requirements or deps.nearest_source(root, cwd)
    plan = deps.plan_lock(root, configured, variant, settings.cuda_index, groups=settings.groups)
    lock = deps.PendingLock(plan)
    if plan.ready is not None and plan.ready.project_lock:
        on_event(Event("info", f"lock: {deps.describe_project_lock(plan.ready)}"))
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
    here = settings.backend == "slurm" and settings.slurm_environment == "python"
    if settings.backend == "local" or here:
        return "local"
    return "cuda" if gpus else "cpu"


LOCK_NOTICE = "lock-uncommitted"  # the marker, under the store's notices, that it was said


def _say_lock_uncommitted(store: Store, lock: deps.PendingLock, on_event: OnEvent) -> None:
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


def _op_stream_files(runtime: Path) -> dict[str, str]:
    """The op streams the runtime wrote under ``runtime``, by their name in ResultInfo.logs
    (``ops`` for rank 0 or the single process, ``ops.rank<N>`` for the others)."""
    found: dict[str, str] = {}
    for rel in produced.files(runtime, contract.ranked(contract.OPS_FILE, "*")):
        rank = rel.rsplit(".rank", 1)[1].split(".")[0]
        if rank.isdigit():
            found[contract.STREAMS["ops"].log_name(int(rank))] = rel
    if op_streams.OPS_LOG not in found and produced.is_file(runtime, contract.OPS_FILE):
        found[op_streams.OPS_LOG] = contract.OPS_FILE
    return found


def _capture_environment(
    record: Record, run_plan: Plan, env: EnvInfo, env_hits: list[str], world_size: int
) -> None:
    """This machine (``env``, what its redaction hid), the seeds, the determinism plan and the
    backend asked for."""
    settings = run_plan.settings
    record.env = env
    record.redactions += env_hits
    record.seeds = make_seeds(settings.seed, world_size)
    isa = resolve_isa(settings.isa, env.cpu_flags)
    record.determinism = plan(run_plan.mode, settings.threads, isa, settings.allow_nondeterministic_ops)
    record.determinism.source_date_epoch = source_date_epoch(record.created, os.environ)
    if settings.trace:
        record.determinism.env[contract.TRACE_ENV] = "1"  # kept with the mode, so a replay traces too
        record.determinism.env[contract.KEEP_CHECKPOINTS_ENV] = str(settings.max_checkpoint_bytes)
    if settings.ops:  # kept with the mode, so a replay records the op stream too
        record.determinism.env[contract.OPS_ENV] = str(settings.ops_steps)
    record.backend = BackendInfo(
        name="?", requested=settings.backend, network=settings.network, gpus=run_plan.gpus
    )


def _inside(root: Path, rel: str, what: str) -> str:
    """``rel`` as a normalised path strictly inside the project.

    Raises:
        UsageError: an absolute path or one that leaves the project (`/`, `..`).
    """
    path = Path(os.path.normpath(root / rel))
    if path == root or not path.is_relative_to(root):
        raise UsageError(
            f"the {what} {rel!r} is not inside the project {root}",
            hint="give a directory inside the project, such as outputs (--outputs: relative to where "
            "you stand; repro.yaml: to the project root)",
        )
    return path.relative_to(root).as_posix()


def discard(prepared: Prepared) -> None:
    """Remove the directory of a run that never started (nothing of it is worth keeping)."""
    if not RunDir(prepared.run_dir).record.is_file():
        shutil.rmtree(prepared.run_dir, ignore_errors=True)


def submit_detached(prepared: Prepared, backend: SlurmBackend, store: Store, on_event: OnEvent) -> str:
    """Submit the run's Slurm job and leave it running (`repro run --detach`); returns the job id.
    `settle_detached` seals the run once the job ended.

    Raises:
        BackendUnavailable: no Slurm controller answers (the run directory is removed).
        UsageError: sbatch refused the job (the run directory is removed).
    """
    from repro.backends import detached

    record, spec = prepared.record, prepared.spec
    record.backend.name = backend.name
    try:
        image = backend.prepare(spec, on_event)
        if image:
            record_image(record, image, store)
        record.results.started = now_iso()
        kept = {
            "record": record.to_dict(),
            "settings": dataclasses.asdict(prepared.settings),
            "outputs_before": prepared.outputs_before,
            "started_ns": prepared.started_ns,
            "tree_before": prepared.tree_before,
        }
        return detached.submit(backend, spec, prepared.run_dir, kept, on_event)
    except BaseException:
        shutil.rmtree(prepared.run_dir, ignore_errors=True)
        raise


def settle_detached(store: Store, on_event: OnEvent) -> list[Record]:
    """Seal every run submitted with `--detach` whose job has ended (`repro ls`); returns the sealed."""
    from repro.backends import detached

    def seal(run_dir: Path, kept: dict[str, Any], spec: RunSpec, result: RunResult) -> Record:
        record = Record.from_dict(kept["record"])
        values: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in kept["settings"].items()
        }
        record.results.finished = now_iso()
        tree_before = kept.get("tree_before")
        prepared = Prepared(
            record, spec, run_dir, _snapshot(kept["outputs_before"]), Settings(**values),
            kept.get("started_ns") or 0, _snapshot(tree_before) if tree_before is not None else None,
        )  # fmt: skip
        collect(record, result, spec, store, prepared)
        store.seal(record, run_dir)
        keep_within_budget(store, prepared.settings.max_bytes, lambda text: on_event(Event("info", text)))
        return record

    return detached.settle(store, on_event, seal)


def _snapshot(kept: dict[str, list[int]]) -> dict[str, tuple[int, int, int]]:
    """A snapshot of files (path → size, mtime, inode) as JSON gave it back."""
    return {k: (int(v[0]), int(v[1]), int(v[2])) for k, v in kept.items()}


def build_spec(
    record: Record,
    code_root: Path,
    run_dir: Path,
    data: list[str],
    outputs: list[str],
    lockfile: Path | None,
    base_image: str | None,
    argv: list[str],
    data_root: Path | None = None,
    variables: Mapping[str, str] | None = None,
    cuda_index: str | None = None,
) -> RunSpec:
    """What a backend executes. ``variables``: the user's variables for the command
    (`repro.facts.command_env`), under repro's own, which win. ``cuda_index``: the cuda.index
    setting, where a CUDA image's wheels are fetched from beside the host's pip sources."""
    layout = RunDir(run_dir)
    layout.runtime.mkdir(parents=True, exist_ok=True)
    env = {**(variables or {}), **run_environment(record)}
    env[contract.OUTPUTS_ENV] = os.pathsep.join(outputs)
    env[contract.DATA_ENV] = os.pathsep.join(data)
    return RunSpec(
        argv=argv,
        project_root=code_root,
        workdir=record.command.cwd,
        env=env,
        runtime_dir=layout.runtime,
        stdout_path=layout.stdout,
        stderr_path=layout.stderr,
        data=data,
        data_root=data_root,
        outputs=outputs,
        nproc_per_node=record.command.nproc_per_node,
        torchrun=record.command.torchrun or record.command.nproc_per_node > 1,
        nodes=record.command.nodes,
        network=record.backend.network,
        gpus=record.backend.gpus,
        lockfile=lockfile,
        base_image=base_image,
        store_dir=run_dir.parent.parent,
        cuda_index=cuda_index,
    )


def execute(
    prepared: Prepared,
    backend: Backend,
    store: Store,
    on_event: OnEvent,
    before_seal: Callable[[LoadedRun], None] | None = None,
) -> Record:
    """Build/reuse the environment, run, collect and seal. A failed command is still sealed.

    ``before_seal`` sees the collected run (its blobs already stored) and may complete its
    record — a check's verdict — before the record is written once.

    Raises:
        BackendUnavailable, BuildError: before the command started (the run dir is removed).
        Interrupted: Ctrl-C before the command started.
    """
    record, spec = prepared.record, prepared.spec
    record.backend.name = backend.name
    if spec.terminal is None:  # else a replay's: the recorded run's
        spec.terminal = terminal_of(on_event)
    build = BuildLog(prepared.run_dir / buildlog.LOG_NAME, on_event)
    try:
        if backend.name != "local":  # the image is built from the lock: it must be there first
            _settle_lock_as_stage(prepared, store, build)
        image = backend.prepare(spec, build)
    except (Exception, KeyboardInterrupt) as e:
        build.failed(e)
        build.keep_in(store.dir, f"{record.id}-build")  # the run directory goes: its build log stays
        shutil.rmtree(prepared.run_dir, ignore_errors=True)
        raise
    finally:
        build.close()
    if image:
        record_image(record, image, store)
        spec.env.update(trackers.image_environment(image))
    record.results.started = now_iso()
    kept = {"outputs": spec.outputs, "data": spec.data, "before": prepared.outputs_before}
    store.write_pending(record, prepared.run_dir, kept)  # what `repro resume` needs if repro dies
    made = _missing_dirs(spec.project_root, spec.outputs)  # the backend makes them for the run
    try:
        result = backend.execute(spec, on_event)
    except Exception:
        shutil.rmtree(prepared.run_dir, ignore_errors=True)  # the command never started: nothing to keep
        raise
    finally:
        _remove_empty(made)
    record.results.finished = now_iso()
    masker = prepared.masker or _fallback_masker(prepared)
    collect(record, result, spec, store, prepared, masker)
    record.redactions = sorted({*record.redactions, *(f"masked in {m}" for m in masker.masked)})
    if prepared.lock is not None and not prepared.lock.done:
        on_event(Event("info", "the command ended; waiting for the lock to seal the record"))
    try:  # a lock compiled in the background while the command ran: its lines go to the build log
        settle_lock(prepared, store, lambda line: build(Event("build", line)))
    except BuildError as e:  # the run happened: record it, say why it is not locked
        record.warn("lock_failed", f"the lock could not be compiled, the run is not locked: {e.message}")
    finally:
        build.close()
    check_lock(record)
    if before_seal is not None:
        before_seal(LoadedRun(record, prepared.run_dir, store.dir))

    def note(text: str) -> None:
        on_event(Event("info", text))

    foreign = prepared.foreign
    trackers.link_mlflow_runs(record, spec.project_root, note, foreign)
    store.seal(record, prepared.run_dir)
    keep_within_budget(store, prepared.settings.max_bytes, note)
    log_capsule = prepared.settings.mlflow_log_capsule
    trackers.after_seal(
        record, prepared.run_dir, spec.project_root, store.blob_path, log_capsule, note, foreign
    )
    return record


def _settle_lock_as_stage(prepared: Prepared, store: Store, on_event: OnEvent) -> None:
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
    """Wait for the run's lock (once) and put it into the record and the spec.

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
    prepared.spec.lockfile = lock.path


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


def record_image(record: Record, image: BuiltImage, store: Store) -> None:
    """Put the image a run uses in its record, and note it in the store's image ledger (what
    `repro gc --images` may remove: images this store made)."""
    record.deps.image = image_info(image, store)
    store_images.note(store.dir, store_images.ImageUse(image.id, record.id, made=not image.reused))


def image_info(image: BuiltImage, store: Store) -> ImageInfo:
    return ImageInfo(
        id=image.id,
        tag=image.tag,
        base=image.base,
        base_id=image.base_id,
        dockerfile=store.put_bytes(image.dockerfile_text.encode()) if image.dockerfile_text else None,
        template=image.template,
        reused=image.reused,
        build_seconds=image.build_seconds,
        loaded=image.loaded,
        installed_from=dict(image.installed_from),
    )


def _fallback_masker(prepared: Prepared) -> Masker:
    return run_masker(dict(os.environ), [], [], Redactor(prepared.settings.secret_patterns))


def _missing_dirs(root: Path, rels: list[str]) -> list[Path]:
    """The directories on the way to each of ``rels`` (under ``root``) that do not exist yet."""
    missing: set[Path] = set()
    for rel in rels:
        path = root / rel
        while path != root and path.is_relative_to(root) and not path.exists():
            missing.add(path)
            path = path.parent
    return sorted(missing, key=lambda p: len(p.parts), reverse=True)  # the deepest first


def _remove_empty(dirs: list[Path]) -> None:
    """Remove the output directories made for a run that it left empty: no empty `outputs/` stays."""
    for path in dirs:
        try:
            path.rmdir()
        except OSError:
            pass  # the run wrote into it (or it was never made)


def collect(
    record: Record,
    result: RunResult,
    spec: RunSpec,
    store: Store,
    prepared: Prepared,
    masker: Masker | None = None,
) -> None:
    """Fold logs, metrics, the in-process environment and the outputs into the record.

    Logs, metrics and logged params pass through ``masker``: a secret the script prints
    or logs is stored as ``***``. Without one (a run sealed later, by `repro resume` or after a
    Slurm job), the secrets of this process's environment and every credential shape are masked.
    """
    masker = masker or _fallback_masker(prepared)
    runtime = spec.runtime_dir
    res = record.results
    res.exit_code = result.exit_code
    res.duration_s = round(result.duration_s, 3)
    res.status = "interrupted" if result.interrupted else ("succeeded" if result.exit_code == 0 else "failed")
    record.backend.details.update(result.details)
    if result.image and not record.deps.image:
        record_image(record, result.image, store)
    learned = sealmask.learn_logs(masker, [spec.stdout_path, spec.stderr_path])
    logged = _collect_logs(record, result, spec, store, masker)
    _merge_process_env(record, runtime)
    checkpoints.collect(record, runtime, store.put_fd, prepared.settings.max_checkpoint_bytes)
    trackers.fold(record, runtime)
    res.trackers = masker.obj(res.trackers, "tracker links")  # a tracking URI may carry a password
    reports = read_reports(runtime)
    reports.written |= set(result.written)
    _runtime_proof(record, reports)
    _determinism_state(record, runtime, reports)
    checkpoints.judge_resume(record, runtime, reports.main_booted)
    if not reports.main_booted and prepared.tree_before is not None:
        # No runtime watched the writes: whatever changed in the project is this run's.
        reports.written |= attribution.changed_since(spec.project_root, prepared.tree_before, spec.data)
    trackers.find_wandb_runs(record, reports.written)
    record.seeds.script_seeds = reports.script_seeds
    found = _undeclared(record, reports, spec, checkpoints.loaded_paths(runtime))
    _record_read(record, found, spec.project_root, store, prepared.settings.max_input_bytes)
    if reports.main_booted:  # what the code the run imported and opened was, for `repro resume`
        record.code.read = code_capture.files_read(record.code, reports.read)
    _collect_outputs(record, spec, store, prepared, masker, reports, logged)
    sealmask.warn_secrets_in_outputs(record, store, masker)
    sealmask.mask_sealed(record, store, masker, learned)


def _collect_logs(
    record: Record, result: RunResult, spec: RunSpec, store: Store, masker: Masker
) -> bytes | None:
    """Keep the command's streams, each rank's, the metrics, the step trace and the logged params,
    masked; name the rank or node that failed first. Returns the metrics the run logged, as written."""
    runtime = spec.runtime_dir
    res = record.results

    def keep(name: str, root: Path, rel: str, where: str) -> None:
        raw = produced.read_bytes(root, rel, limit=None)
        if raw is not None:
            res.logs[name] = store.put_bytes(masker.data(raw, where))

    for name, path in (("stdout", spec.stdout_path), ("stderr", spec.stderr_path)):
        keep(name, path.parent, path.name, "the logs")
    res.stderr_tail = [masker.text(line, "the logs") for line in _tail(spec.stderr_path, 20)]
    rank_logs = _rank_logs(runtime)
    for rank, streams in sorted(rank_logs.items()):
        for name, rel in sorted(streams.items()):
            keep(f"rank{rank}.{name}", runtime, rel, "the logs")
    failed = result.details.get("failed")
    if res.status == "failed" and isinstance(failed, dict):
        _report_failed_node(record, failed, runtime, rank_logs)
    elif res.status == "failed" and rank_logs:
        _report_failed_rank(record, spec, rank_logs)
    res.stderr_tail = [masker.text(line, "the logs") for line in res.stderr_tail]
    for extra in produced.files(runtime, contract.ranked(contract.METRICS_FILE, "*")):
        keep(extra.removesuffix(".jsonl").replace("metrics.", "metrics-"), runtime, extra, "metrics")
    trace = next(
        (
            r
            for r in (contract.TRACE_FILE, contract.ranked(contract.TRACE_FILE, 0))
            if produced.is_file(runtime, r)
        ),
        None,
    )
    if trace is not None:
        keep(TRACE_LOG, runtime, trace, "the step trace")
    written = [r for rank in ("*", -1) for r in produced.files(runtime, dataorder.runtime_files(rank))]
    for name, rel in sorted(dataorder.kept_logs(written).items()):
        keep(name, runtime, rel, "the data order")
    for name, rel in _op_stream_files(runtime).items():  # `--ops`: each process's op stream
        keep(name, runtime, rel, "the op stream")
    metrics = produced.read_stream(runtime, contract.METRICS_FILE, limits.MAX_METRICS_BYTES)
    if metrics is not None:
        res.metrics = store.put_bytes(masker.data(metrics, "metrics"))
        res.final_metrics = {masker.text(k, "metrics"): v for k, v in _final_metrics(metrics).items()}
    params = produced.read_json(runtime, contract.PARAMS_FILE)
    if params:
        res.params = masker.obj(params, "logged params")
    return metrics


def _collect_outputs(
    record: Record,
    spec: RunSpec,
    store: Store,
    prepared: Prepared,
    masker: Masker,
    reports: Reports,
    logged: bytes | None,
) -> None:
    """The files the run wrote that are its outputs, stored; Hydra's own files as logs; a warning
    for each thing about them a user should know (links, shared writes, files outside the project);
    the metric series harvested from them, from stdout and beside ``logged`` (what the run logged)."""
    res = record.results
    res.output_roots = list(spec.outputs)
    claimed: set[str] = set()
    if spec.project_root.resolve() == store.root.resolve():  # other runs share this tree
        claimed = attribution.claimed_elsewhere(store.runs_dir, record.id, prepared.started_ns)
    found = attribution.select(
        spec.project_root, written=reports.written, declared=spec.outputs, before=prepared.outputs_before,
        data=spec.data, exclude=[*res.output_excludes, *trackers.store_paths(record)],
        claimed=claimed - reports.written,
    )  # fmt: skip
    jobs = hydra.job_dirs(found)
    bookkeeping = {rel for rel in found if hydra.is_bookkeeping(rel, jobs)}
    limit = prepared.settings.max_output_bytes
    res.outputs = _store_outputs(spec, store, [f for f in found if f not in bookkeeping], limit, record)
    _hydra_bookkeeping(record, spec, store, masker, sorted(bookkeeping), len(jobs) == 1, limit)
    ranks = {rel: next(iter(w)).rank for rel, w in reports.writers.items() if len(w) == 1}
    sources = harvest.RunSources.read(spec.project_root, spec.stdout_path, spec.outputs, found, logged, ranks)
    wanted = harvest.HarvestSettings(prepared.settings.metrics_from, prepared.settings.metrics_patterns)
    harvest.fold(res, sources, wanted, lambda raw: store.put_bytes(masker.data(raw, "metrics")),
                 lambda text: masker.text(text, "metrics"))  # fmt: skip
    _shared_writes(record, reports)
    _link_warnings(record, spec.runtime_dir)
    record.warnings = [RunWarning(w.code, masker.text(w.message, "warnings")) for w in record.warnings]
    stores = trackers.outside_stores(record)
    outside = {p for p in reports.written_outside if not any(p == s or p.startswith(s + "/") for s in stores)}
    res.outputs_outside_root = sorted(outside)[:_MAX_OUTSIDE]
    if outside:
        shown = ", ".join(res.outputs_outside_root[:3])
        more = len(outside) - 3
        record.warn(
            "outputs_outside_root",
            f"the run wrote files outside the project root, which are not recorded: {shown}"
            + (f" (+{more} more)" if more > 0 else ""),
        )


_MAX_OUTSIDE = 200


def _determinism_state(record: Record, runtime: Path, reports: Reports) -> None:
    """The ledger of nondeterministic ops, the switches as the run left them, and why it failed."""
    det = record.determinism
    det.nondeterministic_ops, fatal = ledger(reports.nondeterministic)
    state = produced.read_json(runtime, contract.ranked(contract.STATE_FILE, 0)) or produced.read_json(
        runtime, contract.STATE_FILE
    )
    det.effective = dict(state.get("effective") or {})
    det.changed_by_script = dict(state.get("changed_by_script") or {})
    record.warnings += state_warnings(det)
    if record.results.status == "failed":
        found = explain_failure(det, fatal, record.results.stderr_tail)
        record.results.failure = found or record.results.failure  # or the compile's (compile_warnings)
    for error in reports.errors:
        record.warn("runtime_settings_failed", f"the repro runtime could not apply its settings to {error}")
    for rel in produced.files(runtime, "boot-error.*.txt"):
        text = (produced.read_text(runtime, rel) or "").strip()[:2000]
        record.warn("runtime_boot_failed", f"the repro runtime failed to start in a process: {text}")


def _runtime_proof(record: Record, reports: Reports) -> None:
    """Record whether the runtime ran; when it never loaded, nothing repro promised was applied."""
    det = record.determinism
    det.applied = reports.main_booted
    if det.applied:
        return
    det.knobs = {}
    record.warn(
        "runtime_not_loaded",
        "the repro runtime never loaded in this command (a reset PYTHONPATH, `python -I`/`-E`/`-S`, "
        "or not Python): seeds and determinism were NOT applied, so this run is not reproducible by "
        f"construction (recorded mode {det.mode}, not applied)",
    )


def _tail(path: Path, n: int) -> list[str]:
    """The last ``n`` lines of a log (its last 64 KiB); none when it is not a regular file."""
    try:
        with produced.open_file(path.parent, path.name) as fd:
            size = os.fstat(fd).st_size
            os.lseek(fd, max(0, size - 64 * 1024), os.SEEK_SET)
            raw = os.read(fd, 64 * 1024)
    except OSError:
        return []
    return raw.decode("utf-8", "replace").splitlines()[-n:]


def _final_metrics(raw: bytes) -> dict[str, float]:
    """Each metric's last value (rows read by the contract's one tolerant reader)."""
    final: dict[str, float] = {}
    for row in contract.metric_rows(raw.decode("utf-8", "replace")):
        with contextlib.suppress(ValueError, TypeError):
            final[str(row["name"])] = float(row["value"])
    return final


def _rank_logs(runtime: Path) -> dict[int, dict[str, str]]:
    """torchrun's per-rank files: ``ranks/<run>_<x>/attempt_<n>/<rank>/std{out,err}.log`` under the
    runtime dir (relative to it), last attempt; nothing reached through a link."""
    found: dict[int, dict[str, str]] = {}
    attempts = [
        (run.mtime_ns, _number(attempt.rel), attempt.rel)
        for run in produced.entries(runtime, RANK_LOGS)
        if run.kind == "dir"
        for attempt in produced.entries(runtime, run.rel)
        if attempt.kind == "dir" and fnmatch.fnmatchcase(attempt.rel.rpartition("/")[2], "attempt_*")
    ]
    for _, _, attempt in sorted(attempts):  # later attempts (torchrun restarts) replace earlier ones
        for rank_dir in produced.entries(runtime, attempt):
            rank = rank_dir.rel.rpartition("/")[2]
            if rank_dir.kind != "dir" or not rank.isdigit():
                continue
            streams = {name: f"{rank_dir.rel}/{name}.log" for name in ("stdout", "stderr")}
            found[int(rank)] = {k: v for k, v in streams.items() if produced.is_file(runtime, v)}
    return found


def _number(name: str) -> int:
    digits = name.rpartition("_")[2]
    return int(digits) if digits.isdigit() else 0


_ROOT_CAUSE = re.compile(
    r"Root Cause \(first observed failure\):.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.S
)


def failed_rank(launcher_stderr: str, rank_stderr: dict[int, str]) -> tuple[int, int | None] | None:
    """The rank that failed first and its exit code, from torchrun's failure summary.

    Without a summary (the launcher itself was killed), the lowest rank whose stderr
    holds a Python traceback; None when no rank can be blamed.
    """
    match = _ROOT_CAUSE.search(launcher_stderr)
    if match:
        return int(match.group(1)), int(match.group(2))
    for rank in sorted(rank_stderr):
        if "Traceback (most recent call last)" in rank_stderr[rank]:
            return rank, None
    return None


def _report_failed_rank(record: Record, spec: RunSpec, rank_logs: dict[int, dict[str, str]]) -> None:
    """Name the rank that failed and make its stderr the run's stderr tail."""
    launcher = produced.read_text(spec.stderr_path.parent, spec.stderr_path.name) or ""
    runtime = spec.runtime_dir
    stderr = {
        r: produced.read_text(runtime, s["stderr"]) or "" for r, s in rank_logs.items() if "stderr" in s
    }
    found = failed_rank(launcher, stderr)
    if found is None:
        return
    rank, code = found
    status = f"exit code {code}" if code is not None else "a Python exception"
    record.warn(
        "rank_failed",
        f"rank {rank} of {len(rank_logs)} failed first ({status}); "
        f"its stderr is kept in the record as rank{rank}.stderr",
    )
    tail = stderr.get(rank, "").splitlines()[-20:]
    prefix = f"[rank{rank}]:"
    record.results.stderr_tail = [line if line.startswith(prefix) else f"{prefix} {line}" for line in tail]


def _report_failed_node(
    record: Record, failed: dict[str, Any], runtime: Path, rank_logs: dict[int, dict[str, str]]
) -> None:
    """A multi-node run: name the node and rank that failed first; its stderr becomes the tail."""
    rank, node, code = failed.get("rank"), failed.get("node"), failed.get("exit_code")
    record.warn(
        "rank_failed",
        f"rank {rank} on node {node} failed first (exit code {code}); the job's other tasks were stopped",
    )
    stderr = rank_logs.get(int(rank), {}).get("stderr") if isinstance(rank, int) else None
    if stderr is not None:
        tail = (produced.read_text(runtime, stderr) or "").splitlines()[-20:]
        record.results.stderr_tail = [f"[{node} rank{rank}]: {line}" for line in tail]


def _merge_process_env(record: Record, runtime: Path) -> None:
    env = produced.read_json(runtime, contract.ENV_FILE)
    if env:
        for key in ("python", "implementation", "torch", "cuda", "nccl"):
            if env.get(key):
                setattr(record.env, key, str(env[key]))
        if env.get("cudnn"):
            record.env.cudnn = str(env["cudnn"])
        if env.get("gpus"):
            record.env.gpus = env["gpus"]
        record.deps.freeze = list(env.get("freeze", []))
        record.deps.site_fingerprint = env.get("site_fingerprint")
    ranks = {
        rel.removesuffix(".json").split("rank")[-1]: produced.read_json(runtime, rel)
        for rel in produced.files(runtime, contract.ranked(contract.ENV_FILE, "*"))
    }
    if ranks or record.command.nproc_per_node > 1:
        world = ranks or {"0": env}
        record.env.world_size = max([int(v.get("world_size", 1)) for v in world.values() if v] or [1])
        record.env.rank_devices = {
            r: str(v.get("device", "cpu")) for r, v in sorted(world.items(), key=lambda kv: int(kv[0])) if v
        }
        for key in ("cuda", "nccl"):  # the launcher may not have imported what the ranks used
            value = next((v.get(key) for _, v in sorted(ranks.items()) if v.get(key)), None)
            if value and not getattr(record.env, key):
                setattr(record.env, key, str(value))
    knobs = produced.read_json(runtime, contract.ranked(contract.KNOBS_FILE, 0)) or produced.read_json(
        runtime, contract.KNOBS_FILE
    )
    if knobs:
        compiler = knobs.pop("compiler", None)  # recorded once, with the software (diff names its change)
        record.env.compiler = str(compiler) if compiler else record.env.compiler
        record.determinism.knobs.update(knobs)
        compile_warnings(record, compiler)


def compile_warnings(record: Record, compiler: Any) -> None:
    """The one line each for a compile whose autotuning a pinned mode turned off, and for a compile
    that found no C++ compiler."""
    turned_off = record.determinism.knobs.get("inductor_autotune_turned_off")
    if turned_off:
        record.warn(
            "compile_autotune_off",
            f"torch.compile asked for {', '.join(turned_off)} (autotuning by timing); mode "
            f"{record.determinism.mode} turned it off, so the compiled code is the same in every run "
            "(`--mode off` keeps it)",
        )
    if compiler == contract.NO_COMPILER:
        base = record.deps.image.base if record.deps.image else None
        where = f"the base image {base}" if base else "this environment"
        message = f"torch.compile needs a C++ compiler, and {where} has none"
        hint = (
            "use a base image with g++ and the Python headers (`repro base-image` makes one; "
            "`image.base` in repro.yaml), or set $CXX"
        )
        if record.results.status == "failed":
            record.results.failure = {"code": "no_compiler", "message": message, "hint": hint}
        else:
            record.warn("no_compiler", f"{message}: {hint}")


_SOURCE = (".py", ".pyc", ".pyi", ".so", ".pyd")


def _undeclared(record: Record, reports: Reports, spec: RunSpec, resumed_from: set[str]) -> list[str]:
    """The project files the run read that are neither code nor declared data (nor its own outputs)."""
    # A file the run wrote and read back (a checkpoint, the model it evaluates) is its own output;
    # so is the checkpoint a resumed run continues from: its chain wrote it.
    candidates = reports.read - reports.written - resumed_from
    opened = {
        p for p in candidates if produced.is_file(*attribution.located(spec.project_root, p, spec.data))
    }
    # Source the interpreter imports is code, and so is every file of the code snapshot (a tracked
    # `conf/config.yaml` Hydra reads): a replay restores their bytes. Every other file read is an
    # input the replay should check.
    configs = {c.path for c in record.command.config_files}
    configs |= {e.path for e in record.code.files if e.stored}
    tracker_stores = trackers.store_paths(record)
    kept = [*spec.data, *spec.outputs, ".repro", ".git", "lockfiles", *tracker_stores]
    prefixes = tuple(p.rstrip("/") + "/" for p in kept)
    exact = {p.rstrip("/") for p in spec.data}
    found = sorted(
        p
        for p in opened
        if p not in configs and p not in exact and not p.startswith(prefixes) and not p.endswith(_SOURCE)
    )
    record.data.undeclared = found
    return found


def _record_read(record: Record, found: list[str], root: Path, store: Store, limit: int) -> None:
    """Record the files the run read as its inputs (`repro.facts.inputs`), kept within ``limit``
    bytes; say which are not kept and how a replay gets them."""
    if not found:
        return
    with HashCache(store.cache_dir / "hashes.sqlite") as cache:
        read = inputs.record_read(found, root, store.put_file, limit, cache)
    record.data.inputs += read.inputs
    if read.inputs:
        paths = [i.path for i in read.inputs]
        shown = ", ".join(paths[:5]) + (f" (+{len(paths) - 5} more)" if len(paths) > 5 else "")
        record.warn(
            "undeclared_inputs",
            f"the run read files that are not declared data; recorded as its inputs: {shown} "
            "(a replay restores them; --data declares them)",
        )
    if read.not_kept:
        named = ", ".join(f"{p} ({human_bytes(n)})" for p, n in read.not_kept[:5])
        more = f" (+{len(read.not_kept) - 5} more)" if len(read.not_kept) > 5 else ""
        record.warn(
            "inputs_not_kept",
            f"the run read files over store.max_input_bytes ({human_bytes(limit)}): hashed, not kept: "
            f"{named}{more} (declare them with --data, or raise the limit, so a replay elsewhere has them)",
        )
    if read.secret:
        record.warn(
            "secret_inputs",
            "the run read files that look like credentials; not recorded as inputs: "
            + ", ".join(read.secret[:5]),
        )


def _hydra_bookkeeping(
    record: Record, spec: RunSpec, store: Store, masker: Masker, paths: list[str], one_job: bool, limit: int
) -> None:
    """Hydra's own files are logs of the run, not outputs, masked like logs (the composed config
    holds every override, its credentials included); its composed config becomes the run's params."""
    res = record.results
    for rel in paths:
        raw = produced.read_bytes(spec.project_root, rel, limit=limit)  # never through a link
        if raw is None:
            continue  # over the size limit, gone, or not a regular file
        found = config_bytes_secrets(rel, raw, masker.redactor)
        clean = (masker.add(found) if found else masker).data(raw, "the Hydra logs")
        res.logs[f"hydra:{rel}"] = store.put_bytes(clean)
        if rel.endswith("/" + hydra.CONFIG_NAME) and one_job:  # parsed before masking: `***` is no YAML
            composed = hydra.composed_params(raw.decode("utf-8", "replace"))
            record.command.params.update((masker.add(found) if found else masker).obj(composed, "params"))


def _store_outputs(
    spec: RunSpec, store: Store, found: list[str], max_bytes: int, record: Record
) -> list[FileEntry]:
    """Hash each output file and keep its bytes (up to the size limit); a link is recorded by its
    target, never read through (`repro.collect.produced`)."""
    entries: list[FileEntry] = []
    for rel in found:
        root, inner = attribution.located(spec.project_root, rel, spec.outputs)
        entry = produced.entry(root, inner, store.put_fd, max_bytes, as_rel=rel)
        if entry is None:
            continue  # gone since it was selected
        if entry.link is None and not entry.stored:
            record.warn(
                "output_too_large",
                f"output {rel} is over the size limit ({entry.size} bytes): hashed, not stored",
            )
        entries.append(entry)
    return entries


def _link_warnings(record: Record, runtime: Path) -> None:
    """Say which links the run made: among its outputs (recorded as links), and where repro reads its
    own reports (never read, so what they point at stays out of the record)."""
    made = [o for o in record.results.outputs if o.link is not None]
    if made:
        shown = ", ".join(f"{o.path} -> {o.link}" for o in made[:3]) + (
            f" (+{len(made) - 3} more)" if len(made) > 3 else ""
        )
        record.warn(
            "output_links", f"outputs that are symbolic links, recorded as links and never followed: {shown}"
        )
    planted = [f for f in produced.walk(runtime) if f.kind == "link"]
    if planted:
        shown = ", ".join(f"{f.rel} -> {f.target}" for f in planted[:3]) + (
            f" (+{len(planted) - 3} more)" if len(planted) > 3 else ""
        )
        record.warn(
            "runtime_links",
            "the run left symbolic links among repro's own files in its runtime directory, "
            f"not read: {shown}",
        )


def _shared_writes(record: Record, reports: Reports) -> None:
    """Outputs more than one process wrote: recorded, and named in one warning."""
    outputs = {o.path for o in record.results.outputs}
    shared = [
        SharedWrite(path, [w.rank for w in writers], [w.pid for w in writers])
        for path, writers in reports.shared(outputs).items()
    ]
    record.results.shared_writes = shared
    if shared:
        shown = "; ".join(f"{s.path} by {s.writers()}" for s in shared[:3]) + (
            f" (+{len(shared) - 3} more)" if len(shared) > 3 else ""
        )
        record.warn(
            "shared_writes",
            f"output files written by more than one process at once: {shown}. Their bytes depend on "
            "which process wrote last (a replay may differ or not load): write each from one rank "
            "(`if rank == 0:`)",
        )


def keep_within_budget(store: Store, max_bytes: int | None, note: Callable[[str], None]) -> None:
    """After a seal: the store's kept checkpoint copies and outputs back within ``store.max_bytes``."""
    if max_bytes is None:
        return
    try:
        freed = budget.enforce(store, max_bytes)
    except OSError as e:  # the run is sealed: the budget waits for the next run or `repro gc`
        note(f"store.max_bytes: could not free space in the store ({e})")
        return
    if freed.files:
        note(
            f"store.max_bytes: removed {plural(freed.files, 'kept file')} of older runs "
            f"({human_bytes(freed.bytes)}), marked not kept in their records"
        )
