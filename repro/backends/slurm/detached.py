"""Detached Slurm runs: submitted, not waited for, sealed by a later `repro ls` once the job ended.

A detached run keeps its directory unsealed with ``detached.json`` beside ``running.json``:
the record captured so far, the run spec and its image's inputs, the job id and what collecting
needs (the output snapshots). ``settle`` asks Slurm about every such run: a job still queued or
running has its state written into ``running.json`` (so `repro ls` shows pending or running); an ended job is
collected and sealed exactly as a run that was waited for. Renaming ``detached.json`` first
makes one `repro ls` the only one to seal a run, whatever runs at the same time.

This module is the Slurm side: the job, its state file and its polling. Capturing the run before
and sealing it after are the runner's (`repro.run.execute.submit_detached`, `settle_detached`): it hands
`submit` what sealing will need and `settle` the function that seals.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from repro.backends.base import Event, OnEvent, RunResult, RunSpec
from repro.backends.images import ImageInputs
from repro.backends.slurm.backend import SlurmBackend
from repro.backends.slurm.commands import JobState, job_state
from repro.backends.slurm.options import SlurmOptions
from repro.store.record import Record
from repro.store.runs import DETACHED as MARKER
from repro.store.runs import Store

_PATHS = ("project_root", "runtime_dir", "stdout_path", "stderr_path", "data_root")

# Seals the run of an ended job: (its run directory, what `submit` was asked to keep, its spec, the
# job's result) → the sealed record.
Seal = Callable[[Path, dict[str, Any], RunSpec, RunResult], Record]


def submit(
    backend: SlurmBackend, spec: RunSpec, run_dir: Path, kept: dict[str, Any], on_event: OnEvent
) -> str:
    """Submit the run's job and leave it running; returns the job id. ``kept`` (JSON): what sealing
    the run needs later, saved with the job's own state in the run directory.

    Raises:
        BackendUnavailable: no Slurm controller answers.
        UsageError: sbatch refused the job.
    """
    job_id = backend.submit(spec, on_event)
    state = {
        "job_id": job_id,
        "submitted": time.time(),
        "version": backend.version,
        "options": backend.options.as_dict(),
        "spec": {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(spec).items()},
        "image": backend.inputs.to_json(),  # what the nodes' image (--node-env docker) was built from
        **kept,
    }
    (run_dir / MARKER).write_text(json.dumps(state))
    _mark(run_dir, "pending")
    return job_id


def settle(store: Store, on_event: OnEvent, seal: Seal) -> list[Record]:
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
        sealed.append(_seal(run_dir, state, job, seal, on_event))
        claimed.unlink(missing_ok=True)
    return sealed


def _seal(run_dir: Path, state: dict[str, Any], job: JobState, seal: Seal, on_event: OnEvent) -> Record:
    raw = state["spec"]
    known = {f.name for f in dataclasses.fields(RunSpec)}  # a job submitted by an older repro: its fields
    spec_fields: dict[str, Any] = {
        k: (Path(v) if k in _PATHS and v is not None else v) for k, v in raw.items() if k in known
    }
    spec = RunSpec(**spec_fields)
    options = SlurmOptions(**{**state["options"], "sbatch_args": tuple(state["options"]["sbatch_args"])})
    backend = SlurmBackend(options)
    backend.version = state.get("version")
    backend.use_image(ImageInputs.from_json(state.get("image") or raw))  # older job files: in the spec
    result = backend.finish(
        spec, str(state["job_id"]), job, job.state == "CANCELLED", time.time() - state["submitted"]
    )
    record = seal(run_dir, state, spec, result)
    on_event(Event("info", f"run {record.id} (job {state['job_id']}) ended {job.state.lower()}: sealed"))
    return record


def _mark(run_dir: Path, status: str, slurm_state: str | None = None) -> None:
    """Write the job's state into the run's in-progress marker, which `repro ls` reads."""
    marker = run_dir / "running.json"
    info: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        info = json.loads(marker.read_text())
    info.update(status=status, detached=True, slurm_state=slurm_state or status.upper())
    marker.write_text(json.dumps(info))
