"""Detached Slurm runs: submitted, not waited for, sealed by a later `repro ls` once the job ended.

A detached run keeps its directory unsealed with ``detached.json`` beside ``running.json``:
the record captured so far, the run spec, the job id and what collecting needs (the output
snapshots). ``settle`` asks Slurm about every such run: a job still queued or running has its
state written into ``running.json`` (so `repro ls` shows pending or running); an ended job is
collected and sealed exactly as a run that was waited for. Renaming ``detached.json`` first
makes one `repro ls` the only one to seal a run, whatever runs at the same time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from repro.backends.base import Event, OnEvent, RunSpec
from repro.backends.slurm import JobState, SlurmBackend, SlurmOptions, job_state
from repro.config import Settings
from repro.runner import Prepared, collect, now_iso, record_image
from repro.store.capsule import Record
from repro.store.runs import DETACHED as MARKER
from repro.store.runs import Store

_PATHS = ("project_root", "runtime_dir", "stdout_path", "stderr_path", "data_root", "lockfile")


def submit(prepared: Prepared, backend: SlurmBackend, store: Store, on_event: OnEvent) -> str:
    """Submit the run's job and leave it running; returns the job id.

    Raises:
        BackendUnavailable: no Slurm controller answers (the run directory is removed).
        UsageError: sbatch refused the job (the run directory is removed).
    """
    import shutil

    record, spec = prepared.record, prepared.spec
    record.backend.name = backend.name
    try:
        image = backend.prepare(spec, on_event)
        if image:
            record_image(record, image, store)
        record.results.started = now_iso()
        job_id = backend.submit(spec, on_event)
    except BaseException:
        shutil.rmtree(prepared.run_dir, ignore_errors=True)
        raise
    state = {
        "job_id": job_id,
        "submitted": time.time(),
        "version": backend.version,
        "options": backend.options.as_dict(),
        "record": record.to_dict(),
        "spec": {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(spec).items()},
        "settings": dataclasses.asdict(prepared.settings),
        "outputs_before": prepared.outputs_before,
        "started_ns": prepared.started_ns,
        "tree_before": prepared.tree_before,
    }
    (prepared.run_dir / MARKER).write_text(json.dumps(state))
    _mark(prepared.run_dir, "pending")
    return job_id


def settle(store: Store, on_event: OnEvent) -> list[Record]:
    """Seal every detached run whose job has ended; note the state of the others. Returns the sealed."""
    sealed: list[Record] = []
    for marker in store.detached_runs():
        run_dir = marker.parent
        try:
            state = json.loads(marker.read_text())
        except (OSError, ValueError):
            continue
        job = job_state(str(state["job_id"])) or JobState("UNKNOWN")
        if job.active:
            _mark(run_dir, "pending" if job.state == "PENDING" else "running", job.state)
            continue
        claimed = run_dir / f"{MARKER}.sealing"
        try:
            marker.rename(claimed)
        except OSError:
            continue  # another `repro ls` is sealing it
        sealed.append(_seal(store, run_dir, state, job, on_event))
        claimed.unlink(missing_ok=True)
    return sealed


def _seal(store: Store, run_dir: Path, state: dict[str, Any], job: JobState, on_event: OnEvent) -> Record:
    record = Record.from_dict(state["record"])
    raw = state["spec"]
    spec_fields: dict[str, Any] = {
        k: (Path(v) if k in _PATHS and v is not None else v) for k, v in raw.items()
    }
    spec = RunSpec(**spec_fields)
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in state["settings"].items()}
    settings = Settings(**values)
    options = SlurmOptions(**{**state["options"], "sbatch_args": tuple(state["options"]["sbatch_args"])})
    backend = SlurmBackend(options)
    backend.version = state.get("version")
    result = backend.finish(
        spec, str(state["job_id"]), job, job.state == "CANCELLED", time.time() - state["submitted"]
    )
    record.results.finished = now_iso()
    prepared = Prepared(
        record, spec, run_dir, _tuples(state["outputs_before"]), settings, state.get("started_ns") or 0,
        _tuples(state["tree_before"]) if state.get("tree_before") is not None else None,
    )  # fmt: skip
    collect(record, result, spec, store, prepared)
    store.seal(record, run_dir)
    on_event(Event("info", f"run {record.id} (job {state['job_id']}) ended {job.state.lower()}: sealed"))
    return record


def _tuples(snapshot: dict[str, list[int]]) -> dict[str, tuple[int, int, int]]:
    return {k: (int(v[0]), int(v[1]), int(v[2])) for k, v in snapshot.items()}


def _mark(run_dir: Path, status: str, slurm_state: str | None = None) -> None:
    """Write the job's state into the run's in-progress marker, which `repro ls` reads."""
    marker = run_dir / "running.json"
    info: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        info = json.loads(marker.read_text())
    info.update(status=status, detached=True, slurm_state=slurm_state or status.upper())
    marker.write_text(json.dumps(info))
