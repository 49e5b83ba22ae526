"""The slurm backend: the user's Slurm cluster, through sbatch, with torchrun across nodes.

The job runs the command through the environment the nodes share with this machine:
this interpreter, on a filesystem every node sees (the usual home or project directory of a
cluster), with the injected runtime on PYTHONPATH as the local backend does.

One batch script per run: ``srun`` starts one task per node (``repro.runtime.node``),
which notes the node's hardware and execs torchrun for that node's ranks (static
rendezvous on the first node: node k holds ranks k*N … k*N+N-1) or the command itself.
Each node's stdout and stderr go to a file of their own, each rank's too (torchrun's
``--log-dir``); repro follows them while it waits, and seals the record when the job
ends. Ctrl-C cancels the job (``scancel``) and the run is recorded as interrupted.

With ``requeue``, sbatch gets ``--requeue`` and ``--signal=USR1@<grace>``: a job that is
preempted or requeued (``scontrol requeue``) starts again in the same run directory with
the same command, so a script that saves checkpoints (on SIGUSR1, or every epoch) and
loads one when present continues where it stopped; a restart sets ``REPRO_RESUMED_FROM``, so
the runtime restores the RNG states recorded at the save of the checkpoint it loads, as
`repro resume` does, and the run stays one run (its restarts and restores in the record).
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from repro.backends.base import (
    PROJECT_ENV,
    RUNTIME_ENV_DIR,
    BuiltImage,
    Event,
    OnEvent,
    RunResult,
    RunSpec,
    link_data,
    merge_pythonpath,
    runtime_source,
)
from repro.backends.images import ImageInputs
from repro.backends.slurm.commands import JobState, cancel, job_state, slurm_version, submit
from repro.backends.slurm.images import node_image
from repro.backends.slurm.options import SlurmOptions
from repro.backends.slurm.sbatch import CONTAINERS
from repro.backends.slurm.script import JOB_DIR, NODE_LOGS, job_script
from repro.collect import produced
from repro.collect.checkpoints import restored
from repro.errors import UsageError
from repro.runtime import contract
from repro.runtime.contract import RANK_LOGS

_POLL_S = 1.0
_REQUEUE_SETTLE_S = 15.0  # how long an ended-looking state must hold before a requeueable job counts as ended


class _Follower:
    """Passes the lines appended to the job's files on as "output" events, each labelled with its node
    (the nodes write files a poll reads: whole lines, not bytes as they come)."""

    def __init__(self, job_dir: Path, on_event: OnEvent) -> None:
        self.job_dir, self.on_event = job_dir, on_event
        self.offsets: dict[Path, int] = {}
        self.partial: dict[Path, bytes] = {}
        self.names: dict[str, str] = {}  # "node0" → the node's Slurm name, once its task said it

    def label(self, path: Path) -> str:
        if path.name == "job.out":
            return "slurm"
        if path.stem not in self.names:
            self.names.update({f"node{k}": str(v.get("node")) for k, v in node_facts(self.job_dir).items()})
        return self.names.get(path.stem, path.stem)

    def poll(self, final: bool = False) -> None:
        for path in (
            sorted(self.job_dir.glob("job.out"))
            + sorted(self.job_dir.glob("node*.out"))
            + sorted(self.job_dir.glob("node*.err"))
        ):
            self._read(path, final)

    def _read(self, path: Path, final: bool) -> None:
        try:
            with produced.open_file(path.parent, path.name) as fd:
                os.lseek(fd, self.offsets.get(path, 0), os.SEEK_SET)
                chunk = b"".join(iter(lambda: os.read(fd, 1 << 20), b""))
        except OSError:
            return
        if not chunk and not final:
            return
        self.offsets[path] = self.offsets.get(path, 0) + len(chunk)
        data = self.partial.pop(path, b"") + chunk
        lines = data.split(b"\n")
        rest = lines.pop()
        if rest and not final:
            self.partial[path] = rest
        elif rest:
            lines.append(rest)
        stream = "stdout" if path.suffix == ".out" and path.name != "job.out" else "stderr"
        label = f"[{self.label(path)}] ".encode()
        if lines:
            self.on_event(Event("output", stream=stream, data=b"".join(label + raw + b"\n" for raw in lines)))


def _describe(state: JobState) -> str:
    where = f" on {state.nodes}" if state.nodes and state.state != "PENDING" else ""
    why = f" ({state.reason})" if state.reason and state.state == "PENDING" else ""
    again = f", restart {state.restarts}" if state.restarts else ""
    return f"{state.state.lower()}{where}{why}{again}"


class SlurmBackend:
    """Submits the run as one batch job and follows it to its end."""

    name = "slurm"

    def __init__(self, options: SlurmOptions | None = None) -> None:
        self.options = options or SlurmOptions()
        self.version: str | None = None
        self.image: str | None = None  # the run's image, when the nodes run it (environment docker, podman)
        self.archive: Path | None = None  # where the nodes load it from (podman: into each node's storage)
        self.inputs = ImageInputs()  # what that image is built from

    def use_image(self, inputs: ImageInputs) -> None:
        """The inputs of the run's image, built when the nodes run one (`images.BuildsImage`)."""
        self.inputs = inputs

    def prepare(self, spec: RunSpec, on_event: OnEvent) -> BuiltImage | None:
        """Check that a controller answers and note its version; with environment docker or podman,
        build or reuse the run's image (docker: the nodes use this machine's engine, or one that has
        the image; podman: each node loads it from an archive in the store into its own storage).

        Raises:
            BackendUnavailable: no Slurm commands, no controller answers, no Docker engine or Podman.
            UsageError: GPUs asked for (not supported on this backend yet); a container without a lock.
            BuildError: the image could not be built.
        """
        if spec.gpus:
            raise UsageError(
                "--gpus with --backend slurm is not supported yet",
                hint="ask for GPUs with --sbatch-arg=--gpus-per-node=N",
            )
        self.version = slurm_version()
        engine = self.options.environment
        if engine not in CONTAINERS:
            return None
        if self.inputs.lockfile is None:
            raise UsageError(
                f"--node-env {engine} builds the image from the lock; the project declares no dependencies",
                hint="add a requirements.in (or pyproject dependencies), or use --node-env python",
            )
        built, self.archive = node_image(engine, self.inputs, spec, on_event)
        self.image = built.id or built.tag
        on_event(Event("info", f"--node-env {engine}: each node runs the ranks in the run's image, on the "
                               "host's network (their rendezvous needs it)"))  # fmt: skip
        return built

    def environment(self, spec: RunSpec) -> dict[str, str]:
        """The variables the job exports: the run's own, and where the runtime and project are; the
        submitting shell's own PYTHONPATH only where the ranks run with this interpreter (in the run's
        image, the image's packages alone: a host path on it could reach host packages the image
        does not hold)."""
        inject, package_parent = runtime_source()
        env = dict(spec.env)
        extra = None if self.image else os.environ.get("PYTHONPATH")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(inject), str(package_parent), extra) if p)
        env[RUNTIME_ENV_DIR] = str(spec.runtime_dir)
        env[PROJECT_ENV] = str(spec.project_root)
        return env

    def execute(self, spec: RunSpec, on_event: OnEvent) -> RunResult:
        """Submit, follow the job's logs until it ends, and report how it ended.

        Raises:
            BackendUnavailable: Slurm stopped answering before the job was submitted.
            UsageError: sbatch refused the job.
        """
        start = time.monotonic()
        job_id = self.submit(spec, on_event)
        on_event(Event("info", f"Ctrl-C cancels job {job_id}"))
        follower = _Follower(spec.runtime_dir / JOB_DIR, on_event)
        state, interrupted = self._wait(job_id, follower, on_event)
        follower.poll(final=True)
        return self.finish(spec, job_id, state, interrupted, time.monotonic() - start)

    def submit(self, spec: RunSpec, on_event: OnEvent) -> str:
        """Write the batch script into the run's directory and sbatch it; returns the job id.

        Raises:
            BackendUnavailable: Slurm stopped answering.
            UsageError: sbatch refused the job.
        """
        job_dir = spec.runtime_dir / JOB_DIR
        job_dir.mkdir(parents=True, exist_ok=True)
        link_data(spec)  # a replay runs in a scratch copy of the code; the data stays where it is
        for rel in spec.outputs:
            (spec.project_root / rel).mkdir(parents=True, exist_ok=True)
        script = job_dir / "job.sbatch"
        run_id = spec.env.get(contract.RUN_ID_ENV, "run")
        # `env PYTHONPATH=… python train.py` keeps the injected runtime ahead of its own entries
        spec = replace(
            spec, argv=merge_pythonpath(spec.argv, os.pathsep.join(str(p) for p in runtime_source()))
        )
        env = self.environment(spec)
        text = job_script(spec, self.options, sys.executable, env, run_id, self.image, self.archive)
        script.write_text(text)
        job_id = submit(script, self.options)
        on_event(Event("info", f"submitted batch job {job_id} ({self.options.nodes} node(s) × "
                               f"{spec.nproc_per_node} process(es))"))  # fmt: skip
        return job_id

    def _wait(self, job_id: str, follower: _Follower, on_event: OnEvent) -> tuple[JobState, bool]:
        seen = ""
        interrupted = False
        last = JobState("PENDING")
        while True:
            try:
                state = job_state(job_id) or JobState("UNKNOWN")
                said = _describe(state)
                if said != seen:
                    on_event(Event("info", f"job {job_id} {said}"))
                    seen = said
                last = state
                follower.poll()
                if not state.active:
                    if self._requeued(job_id, state, interrupted):
                        continue
                    return last, interrupted or state.state == "CANCELLED"
                time.sleep(_POLL_S)
            except KeyboardInterrupt:
                if not interrupted:
                    interrupted = True
                    on_event(Event("info", f"cancelling job {job_id}"))
                    cancel(job_id)

    def _requeued(self, job_id: str, state: JobState, interrupted: bool) -> bool:
        """Whether an ended-looking job is being requeued: between the kill of a requeue (scontrol
        requeue, preemption, a node failure) and its return to PENDING the controller may show it
        FAILED or CANCELLED for a moment. With --requeue, such a state counts as final only once it
        has held for ``_REQUEUE_SETTLE_S``."""
        if not self.options.requeue or interrupted or state.state == "COMPLETED":
            return False
        deadline = time.monotonic() + _REQUEUE_SETTLE_S
        while time.monotonic() < deadline:
            time.sleep(_POLL_S / 2)
            again = job_state(job_id)
            if again is not None and (again.active or again.restarts > state.restarts):
                return True
        return False

    def finish(
        self, spec: RunSpec, job_id: str, state: JobState, interrupted: bool, duration: float
    ) -> RunResult:
        """The result of an ended job: its exit code, logs gathered, nodes, the node and rank that failed."""
        job_dir = spec.runtime_dir / JOB_DIR
        facts = node_facts(job_dir)
        names = {int(k): str(v.get("node")) for k, v in facts.items()}
        _combine(job_dir, spec, names)
        _renumber_rank_logs(spec.runtime_dir, spec.nproc_per_node)
        failed = failed_task(_read(job_dir / "job.out"), names)
        if state.state == "COMPLETED":
            code = 0
        elif interrupted:
            code = 130
        else:
            code = (failed or {}).get("exit_code") or state.exit_code or 1
        details: dict[str, Any] = {
            "python": sys.executable if self.options.environment == "python" else "python in the run's image",
            "network": "host" if self.options.environment in CONTAINERS else None,  # the ranks' rendezvous
            "project_root": str(spec.project_root),
            "slurm": {
                "job_id": job_id, "state": state.state, "version": self.version,
                "partition": state.partition, "node_list": state.nodes,
                "nodes": [names[k] for k in sorted(names)], "restarts": state.restarts,
                "options": self.options.as_dict(),
                "restored": restored(spec.runtime_dir),  # what each restart continued from
                "node_hardware": {str(v.get("node")): v for v in facts.values()},
                "rank_nodes": {
                    str(k * spec.nproc_per_node + r): names[k]
                    for k in sorted(names) for r in range(spec.nproc_per_node)
                },
            },
        }  # fmt: skip
        if failed and not interrupted:
            details["failed"] = _blame(failed, spec)
        return RunResult(exit_code=code, duration_s=duration, interrupted=interrupted, details=details)


def _read(path: Path) -> str:
    return (produced.read_at(path, limit=None) or b"").decode("utf-8", "replace")


def node_facts(job_dir: Path) -> dict[int, dict[str, Any]]:
    """Each node's facts as ``repro.runtime.node`` wrote them, by node rank."""
    found: dict[int, dict[str, Any]] = {}
    for rel in produced.files(job_dir, "node*.json"):
        data = produced.read_json(job_dir, rel)
        if isinstance(data.get("node_rank"), int):
            found[data["node_rank"]] = data
    return found


def _combine(job_dir: Path, spec: RunSpec, names: dict[int, str]) -> None:
    """The run's stdout: every node's stdout in node order; its stderr: the job's, then every node's."""
    ranks = sorted({int(p.stem[4:]) for p in job_dir.glob("node*.out") if p.stem[4:].isdigit()} | set(names))
    with open(spec.stdout_path, "ab") as out:
        for k in ranks:
            out.write(produced.read_bytes(job_dir, f"node{k}.out", limit=None) or b"")
    with open(spec.stderr_path, "ab") as err:
        err.write(produced.read_bytes(job_dir, "job.out", limit=None) or b"")
        for k in ranks:
            err.write(produced.read_bytes(job_dir, f"node{k}.err", limit=None) or b"")


def _renumber_rank_logs(runtime: Path, nproc_per_node: int) -> None:
    """torchrun numbers each node's rank logs by local rank; the record wants global ranks.

    ``ranks-by-node/node<k>/<run>/attempt_<n>/<local>/`` → ``ranks/node<k>-<run>/attempt_<n>/<k*N+local>/``.
    """
    base = runtime / NODE_LOGS
    if not base.is_dir():
        return
    for node_dir in _dirs(base, "node*"):
        k = int(node_dir.name[4:]) if node_dir.name[4:].isdigit() else 0
        for run_dir in _dirs(node_dir, "*"):
            for attempt in _dirs(run_dir, "attempt_*"):
                for local in _dirs(attempt, "*"):
                    if not local.name.isdigit():
                        continue
                    dest = runtime / RANK_LOGS / f"{node_dir.name}-{run_dir.name}" / attempt.name
                    dest.mkdir(parents=True, exist_ok=True)
                    local.rename(dest / str(k * nproc_per_node + int(local.name)))


def _dirs(parent: Path, pattern: str) -> list[Path]:
    """The directories in ``parent`` whose names match ``pattern``; links are not among them."""
    return [
        parent / f.rel
        for f in produced.entries(parent)
        if f.kind == "dir" and fnmatch.fnmatch(f.rel, pattern)
    ]


_SRUN_FAILED = re.compile(r"srun: error: (\S+): task (\d+): Exited with exit code (\d+)")
_ROOT_RANK = re.compile(
    r"Root Cause \(first observed failure\):.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.S
)


def failed_task(job_out: str, names: dict[int, str]) -> dict[str, Any] | None:
    """The first task srun saw exit non-zero: its node name, node rank and exit code."""
    match = _SRUN_FAILED.search(job_out)
    if not match:
        return None
    node, task, code = match.group(1), int(match.group(2)), int(match.group(3))
    by_name = {v: k for k, v in names.items()}
    return {"node": node, "node_rank": by_name.get(node, task), "exit_code": code}


def _blame(failed: dict[str, Any], spec: RunSpec) -> dict[str, Any]:
    """Add the global rank that failed on the failed node (torchrun's root cause, else its first rank)."""
    k = int(failed["node_rank"])
    rank = k * spec.nproc_per_node
    err = _read(spec.runtime_dir / JOB_DIR / f"node{k}.err")
    root = _ROOT_RANK.search(err)
    if root:
        rank = int(root.group(1))
    return {**failed, "rank": rank}
