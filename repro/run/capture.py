"""`repro run`, first phase: what the run is — its command, code, data and environment — recorded before
it starts, its lock started in the background and its run directory made."""

from __future__ import annotations

import dataclasses
import os
import time
from datetime import datetime
from pathlib import Path

from repro import __version__
from repro.backends import registry
from repro.backends.base import (
    Event,
    OnEvent,
)
from repro.collect import attribution
from repro.config import Plan, Settings
from repro.errors import NotFoundError, UsageError
from repro.facts import code as code_capture
from repro.facts import command as cmd
from repro.facts import command_env, hydra, lockvariants
from repro.facts.cpus import default_threads
from repro.facts.data import capture_data
from repro.facts.determinism import (
    check_gpu_mode,
    plan,
    resolve_isa,
    source_date_epoch,
)
from repro.facts.env import host_env
from repro.facts.secrets import Masker, Redactor, redacted_options, run_masker
from repro.facts.secrets.verdicts import VERDICTS_DB, Verdicts
from repro.facts.seeds import make_seeds
from repro.run.execute import build_spec
from repro.run.lock import say_lock_uncommitted, start_lock
from repro.run.prepared import Prepared, ProgressFactory, RunRequest, now_iso
from repro.runtime import contract
from repro.store.record import BackendInfo, CommandInfo, EnvInfo, FileEntry, Record
from repro.store.runs import Store, new_run_id
from repro.store.statcache import HashCache


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
    here = registry.in_place(settings.backend)
    check_gpu_mode(
        run_plan.mode, run_plan.gpus, len(env.gpus), settings.backend, run_plan.source("mode"), here
    )
    safe_argv, argv_hits = redactor.argv(argv)
    hidden = redacted_options(safe_argv)
    if hidden:
        on_event(Event("info", f"secret values of {', '.join(hidden)} are recorded as *** (the record "
                               "keeps no secret); a replay will refuse the command: pass secrets "
                               "through environment variables to keep it replayable"))  # fmt: skip
    configs = cmd.config_files(cmd.script_args(argv), cwd, root)
    masker = run_masker(dict(os.environ), argv, configs, redactor)

    record = Record(id=new_run_id(), created=now_iso(), project=root.name, repro_version=__version__)
    nodes = registry.nodes(settings.backend, settings.section)
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
    lock = start_lock(root, cwd, run_plan, on_event)
    say_lock_uncommitted(store, lock, on_event)
    task_cpus = registry.task_cpus(settings.backend, settings.section, nproc)
    threads = settings.threads or default_threads(nproc, task_cpus)
    _capture_environment(record, run_plan, env, env_hits, nproc * nodes, threads)

    record.results.output_excludes = list(settings.outputs_exclude)
    run_dir = store.begin_run(record.id, record.command.argv)
    variables = command_env.select(record.env.variables, allowed=settings.env_allow).env
    spec = build_spec(record, root, run_dir, data, outputs, argv, variables=variables)
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
                root, put, exclude=[*not_code, lockvariants.LOCK_DIR], cache=cache,
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


def _capture_environment(
    record: Record, run_plan: Plan, env: EnvInfo, env_hits: list[str], world_size: int, threads: int
) -> None:
    """This machine (``env``, what its redaction hid), the seeds, the determinism plan (at ``threads``)
    and the backend asked for."""
    settings = run_plan.settings
    record.env = env
    record.redactions += env_hits
    record.seeds = make_seeds(settings.seed, world_size)
    isa = resolve_isa(settings.isa, env.cpu_flags)
    record.determinism = plan(run_plan.mode, threads, isa, settings.allow_nondeterministic_ops)
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
