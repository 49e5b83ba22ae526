"""`repro run`, second phase: choose and prepare the backend, run the command (or submit a detached
Slurm job and settle it later), then collect and seal.

Core only: returns the sealed record; the CLI decides what to print and the exit code.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repro.backends import buildlog, registry
from repro.backends.base import (
    Backend,
    Event,
    OnEvent,
    RunResult,
    RunSpec,
    terminal_of,
)
from repro.backends.buildlog import BuildLog
from repro.config import Settings
from repro.errors import BuildError
from repro.facts.determinism import (
    run_environment,
)
from repro.integrations import trackers
from repro.run.collect import collect, fallback_masker, keep_within_budget
from repro.run.images import record_image
from repro.run.lock import check_lock, settle_lock, settle_lock_as_stage
from repro.run.prepared import Prepared, now_iso
from repro.runtime import contract
from repro.store.record import Record
from repro.store.rundir import RunDir
from repro.store.runs import LoadedRun, Store

if TYPE_CHECKING:
    from repro.backends.images import ImageInputs
    from repro.backends.slurm.backend import SlurmBackend


def backend_options(settings: Settings) -> object:
    """The options the settings (repro.yaml, flags) give their backend (Slurm: its allocation)."""
    return registry.options(settings.backend, settings.section)


def select_backend(
    name: str,
    on_event: OnEvent,
    need_lock: bool = True,
    options: object = None,
    base_image: str | None = None,
) -> Backend:
    """The backend called ``name`` (`repro.backends.registry`), given ``options`` when it takes some;
    `auto`: docker when an engine answers (and dependencies are declared, and the engine holds
    ``base_image`` when one is named), else local, said in one line.

    A missing base image is never made here: that takes root, debootstrap and minutes
    (`repro base-image`, which the CI recipes run explicitly).

    Raises:
        BackendUnavailable: `docker` asked for and no engine answers.
    """
    if name == registry.AUTO:
        name = registry.auto(on_event, need_lock, base_image)
    return registry.get(name).make(options)


def submit_detached(prepared: Prepared, backend: SlurmBackend, store: Store, on_event: OnEvent) -> str:
    """Submit the run's Slurm job and leave it running (`repro run --detach`); returns the job id.
    `settle_detached` seals the run once the job ended.

    Raises:
        BackendUnavailable: no Slurm controller answers (the run directory is removed).
        UsageError: sbatch refused the job (the run directory is removed).
    """
    from repro.backends.slurm import detached

    record, spec = prepared.record, prepared.spec
    record.backend.name = backend.name
    try:
        hand_image(prepared, backend)
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
    from repro.backends.slurm import detached

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
    argv: list[str],
    data_root: Path | None = None,
    variables: Mapping[str, str] | None = None,
) -> RunSpec:
    """What every backend executes (an image's inputs are `image_inputs`). ``variables``: the user's
    variables for the command (`repro.facts.command_env`), under repro's own, which win."""
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
        network=record.backend.network,
        gpus=record.backend.gpus,
        store_dir=run_dir.parent.parent,
    )


def image_inputs(prepared: Prepared) -> ImageInputs:
    """What the run's image is made from: its lock, the settings' base image and CUDA index, the
    image a capsule carries."""
    from repro.backends.images import ImageInputs  # the image machinery: only for a backend that builds one

    settings = prepared.settings
    return ImageInputs(
        lockfile=prepared.lockfile,
        base_image=settings.base_image,
        cuda_index=settings.cuda_index,
        recorded_image=prepared.recorded_image,
        image_archive=prepared.image_archive,
    )


def hand_image(prepared: Prepared, backend: Backend) -> None:
    """Give a backend that builds an image (the registry's ``locks_first``) the run's `image_inputs`."""
    if not registry.locks_first(backend.name):
        return
    from repro.backends.images import BuildsImage

    if isinstance(backend, BuildsImage):
        backend.use_image(image_inputs(prepared))


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
        if registry.locks_first(backend.name):  # the image is built from the lock: it must be there first
            settle_lock_as_stage(prepared, store, build)
        hand_image(prepared, backend)
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
    masker = prepared.masker or fallback_masker(prepared)
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
    trackers.before_seal(record, spec.project_root, note, foreign)
    store.seal(record, prepared.run_dir)
    keep_within_budget(store, prepared.settings.max_bytes, note)
    log_capsule = prepared.settings.mlflow_log_capsule
    trackers.after_seal(
        record, prepared.run_dir, spec.project_root, store.blob_path, log_capsule, note, foreign
    )
    return record


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
