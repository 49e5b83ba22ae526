"""The slurm backend: the user's Slurm cluster, through sbatch, with torchrun across nodes.

The only module that calls sbatch, squeue, scontrol, scancel or sinfo. The job runs
the command through the environment the nodes share with this machine: this
interpreter, on a filesystem every node sees (the usual home or project directory of a
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
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from repro.backends import sbatch
from repro.backends.base import (
    PROJECT_ENV,
    RANK_LOGS,
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
from repro.collect import produced
from repro.collect.checkpoints import RESUMED_FROM_ENV, restored
from repro.errors import BackendUnavailable, CapsuleInvalid, UsageError
from repro.runtime import contract
from repro.store.capsule import RECORD_NAME, Record

JOB_DIR = "slurm"  # under the runtime dir: the batch script, the job's and each node's output
NODE_LOGS = "ranks-by-node"  # torchrun's per-rank logs, one directory per node, before renumbering
_ACTIVE = {
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
    "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD", "STOPPED",
}  # fmt: skip
_SCRUB = ("RANK", "WORLD_SIZE", "LOCAL_RANK", contract.BOOT_PID_ENV, "PYTHONSTARTUP")
_HINT = (
    "run repro where `sbatch` and `scontrol ping` work, or start a local test cluster with `make slurm-up`"
)
_POLL_S = 1.0
_REQUEUE_SETTLE_S = 15.0  # how long an ended-looking state must hold before a requeueable job counts as ended


@dataclass(frozen=True)
class SlurmOptions:
    """The allocation asked of sbatch."""

    nodes: int = 1
    partition: str | None = None
    time: str | None = None
    account: str | None = None
    sbatch_args: tuple[str, ...] = ()
    requeue: bool = False
    environment: str = "python"  # python: this interpreter, shared filesystem; docker: the run's image
    grace_s: int = 120  # SIGUSR1 this long before the time limit, when requeue is on

    @classmethod
    def from_settings(cls, section: Mapping[str, Any]) -> SlurmOptions:
        """The allocation the ``slurm:`` settings (repro.yaml, flags; checked by `repro.config`) ask for."""
        return cls(
            nodes=section["nodes"], partition=section["partition"], time=section["time"],
            account=section["account"], sbatch_args=tuple(section["sbatch_args"]),
            requeue=section["requeue"], environment=section["environment"],
        )  # fmt: skip

    @classmethod
    def recorded(cls, record: Record) -> SlurmOptions:
        """The allocation a Slurm run had (its record's ``backend.details``, as `as_dict` wrote it), to
        ask for the same again; the nodes come from the command.

        Raises:
            CapsuleInvalid: an option of a shape repro does not pass to sbatch (a forged record).
        """
        slurm = record.backend.details.get("slurm")
        asked = slurm.get("options") if isinstance(slurm, dict) else None
        asked = asked if isinstance(asked, dict) else {}
        options = cls(
            nodes=record.command.nodes,
            partition=asked.get("partition"),
            time=asked.get("time"),
            account=asked.get("account"),
            sbatch_args=asked.get("sbatch_args") or (),  # checked below: a list of text, or refused
            requeue=bool(asked.get("requeue")),
            environment=asked.get("environment") or "python",
        )
        found = sbatch.problems({name: getattr(options, name) for name in sbatch.FIELDS})
        if found:
            raise CapsuleInvalid(
                f"run {record.id}: the recorded Slurm options: {found[0]}",
                member=RECORD_NAME,
                hint="nothing was submitted; replay it on another backend (--backend docker)",
            )
        return replace(options, sbatch_args=tuple(options.sbatch_args))

    def as_dict(self) -> dict[str, Any]:
        """What the record keeps of them (``backend.details["slurm"]["options"]``)."""
        return {
            "nodes": self.nodes, "partition": self.partition, "time": self.time, "account": self.account,
            "sbatch_args": list(self.sbatch_args), "requeue": self.requeue, "environment": self.environment,
        }  # fmt: skip


@dataclass
class JobState:
    """One look at a job: its state, exit code, restarts and nodes."""

    state: str
    exit_code: int | None = None
    signal: int | None = None
    restarts: int = 0
    nodes: str | None = None
    reason: str | None = None
    partition: str | None = None
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.state in _ACTIVE


# --------------------------------------------------------------------------- the Slurm commands


def _slurm(args: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run a Slurm command.

    Raises:
        BackendUnavailable: the command is not installed or does not answer in time.
    """
    if shutil.which(args[0]) is None:
        raise BackendUnavailable(f"no Slurm here: `{args[0]}` is not on PATH", hint=_HINT)
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise BackendUnavailable(
            f"Slurm did not answer `{' '.join(args)}` in {timeout:.0f}s", hint=_HINT
        ) from e


def slurm_version() -> str:
    """The controller's Slurm version (``22.05.8``), after checking that it answers.

    Raises:
        BackendUnavailable: no Slurm commands, or no controller answers.
    """
    ping = _slurm(["scontrol", "ping"], timeout=20)
    if ping.returncode != 0 or "UP" not in ping.stdout:
        said = (ping.stderr or ping.stdout).strip().splitlines()
        raise BackendUnavailable(
            "no Slurm controller answers" + (f": {said[-1]}" if said else ""), hint=_HINT
        )
    out = _slurm(["sbatch", "--version"]).stdout.strip()
    return out.split()[-1] if out else "unknown"


def parse_job(text: str) -> JobState | None:
    """``scontrol show job -o`` output → a JobState (None when the job is unknown)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    if "JobState=" not in line:
        return None
    fields = {m.group(1): m.group(2) for m in re.finditer(r"(\S+?)=(\S*)", line)}
    code, _, sig = fields.get("ExitCode", "").partition(":")
    return JobState(
        state=fields.get("JobState", "UNKNOWN"),
        exit_code=int(code) if code.isdigit() else None,
        signal=int(sig) if sig.isdigit() else None,
        restarts=int(fields["Restarts"]) if fields.get("Restarts", "").isdigit() else 0,
        nodes=fields.get("NodeList") if fields.get("NodeList") not in (None, "(null)") else None,
        reason=fields.get("Reason") if fields.get("Reason") not in (None, "None") else None,
        partition=fields.get("Partition"),
        fields=fields,
    )


def job_state(job_id: str) -> JobState | None:
    """The job as the controller sees it now; once it has forgotten the job (MinJobAge), as
    accounting remembers it (sacct, where the cluster keeps accounting); else None."""
    state = parse_job(_slurm(["scontrol", "show", "job", "-o", job_id]).stdout)
    if state is not None or shutil.which("sacct") is None:
        return state
    out = _slurm(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State,ExitCode,NodeList,Partition"])
    return parse_sacct(out.stdout) if out.returncode == 0 else None


def parse_sacct(text: str) -> JobState | None:
    """``sacct -X -n -P -o State,ExitCode,NodeList,Partition`` output → a JobState."""
    line = text.strip().splitlines()[-1] if text.strip() else ""
    parts = line.split("|")
    if len(parts) != 4 or not parts[0]:
        return None
    code, _, sig = parts[1].partition(":")
    return JobState(
        state=parts[0].split()[0],  # "CANCELLED by 0" → CANCELLED
        exit_code=int(code) if code.isdigit() else None,
        signal=int(sig) if sig.isdigit() else None,
        nodes=parts[2] or None,
        partition=parts[3] or None,
    )


def expand_nodes(nodelist: str) -> list[str]:
    """``n[1-2]`` → ``["n1", "n2"]``."""
    out = _slurm(["scontrol", "show", "hostnames", nodelist])
    return out.stdout.split() if out.returncode == 0 else [nodelist]


def cancel(job_id: str) -> None:
    _slurm(["scancel", job_id])


def checked(options: SlurmOptions) -> SlurmOptions:
    """The options, when each has a shape repro passes to sbatch (`repro.backends.sbatch`).

    Flags and repro.yaml are checked when settings resolve, a record when it is replayed; this is
    the last look before anything is written or submitted.

    Raises:
        UsageError: an option of another shape.
    """
    found = sbatch.problems({name: getattr(options, name) for name in sbatch.FIELDS})
    if found:
        raise UsageError(f"Slurm: {found[0]}", hint="see README: On a cluster, for the shapes repro passes")
    return options


def submit(script: Path, options: SlurmOptions) -> str:
    """sbatch the script; returns the job id.

    Raises:
        UsageError: sbatch refused the job (bad partition, account, time, extra argument), or an
            option of a shape repro does not pass.
    """
    checked(options)
    proc = _slurm(["sbatch", "--parsable", *options.sbatch_args, str(script)], timeout=60)
    if proc.returncode != 0:
        said = " ".join(proc.stderr.split()) or f"exit status {proc.returncode}"
        raise UsageError(
            f"sbatch refused the job: {said}", hint="check --partition, --account, --time and --sbatch-arg"
        )
    return proc.stdout.strip().split(";")[0]


# --------------------------------------------------------------------------- the batch script


def job_script(
    spec: RunSpec,
    options: SlurmOptions,
    python: str,
    env: dict[str, str],
    run_id: str,
    image: str | None = None,
) -> str:
    """The batch script of one run (pure: the same inputs give the same text).

    With ``image`` every node's task runs the command in that image (``docker run``, host
    network, the project, the runtime and the data mounted at their own paths).
    """
    checked(options)
    q = shlex.quote
    lines = _directives(spec, options, run_id)
    lines += ["", "set -u", *(f"unset {name}" for name in _SCRUB)]
    lines += [f"export {k}={q(v)}" for k, v in sorted(env.items())]
    if options.requeue:
        # A requeued job starts this script again: the command continues as `repro resume` does,
        # the runtime restoring the RNG states recorded when the checkpoint it loads was saved.
        lines += [
            'if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then',
            f'    export {RESUMED_FROM_ENV}="${{{RESUMED_FROM_ENV}:-${contract.RUN_ID_ENV}}}"',
            "fi",
        ]
    lines += [
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "addr=$(scontrol show node \"$head\" -o | tr ' ' '\\n' | sed -n 's/^NodeAddr=//p')",
        'port=$((20000 + SLURM_JOB_ID % 20000))',
        'echo "repro: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, restart ${SLURM_RESTART_COUNT:-0},'
        ' first node $head (${addr:-$head}:$port)"',
    ]  # fmt: skip
    command = " ".join(q(a) for a in _launch(spec, options, python, env, image))
    command += ' --master="${addr:-$head}:$port" -- ' + " ".join(q(a) for a in spec.argv)
    if not options.requeue:
        return "\n".join([*lines, command, ""])
    # The warning before the time limit (or `scancel --signal=USR1 --batch`) reaches this shell:
    # pass it to the command through srun, let it save and stop, then put the job back in the queue.
    lines += [
        "requeue() {",
        '    echo "repro: SIGUSR1: asking the command to save, then requeueing job $SLURM_JOB_ID"',
        '    kill -USR1 "$step" 2>/dev/null; wait "$step"; scontrol requeue "$SLURM_JOB_ID"; exit 0',
        "}",
        "trap requeue USR1",
        command + " &",
        "step=$!",
        'while kill -0 "$step" 2>/dev/null; do wait "$step"; status=$?; done',
        'exit "${status:-0}"',
        "",
    ]
    return "\n".join(lines)


def _directives(spec: RunSpec, options: SlurmOptions, run_id: str) -> list[str]:
    """The script's first line and its ``#SBATCH`` lines: the job, its allocation, requeueing.

    Raises:
        UsageError: a path of the run that sbatch cannot take (a control character).
    """
    job_dir = spec.runtime_dir / JOB_DIR
    try:
        lines = [
            "#!/bin/bash", sbatch.directive("job-name", f"repro-{run_id}"),
            sbatch.directive("nodes", options.nodes), sbatch.directive("ntasks-per-node", 1),
            sbatch.directive("chdir", spec.project_root / spec.workdir),
            sbatch.directive("output", job_dir / "job.out"), sbatch.directive("open-mode", "append"),
        ]  # fmt: skip
    except ValueError as e:
        raise UsageError(
            f"Slurm cannot take this run's paths: {e}",
            hint="move the project to a path without control characters",
        ) from e
    if spec.nproc_per_node > 1:
        lines.append(sbatch.directive("cpus-per-task", spec.nproc_per_node))
    for flag, value in (
        ("partition", options.partition),
        ("time", options.time),
        ("account", options.account),
    ):
        if value:
            lines.append(sbatch.directive(flag, value))
    if options.requeue:
        lines += [sbatch.directive("requeue"), sbatch.directive("signal", f"B:USR1@{options.grace_s}")]
    else:
        lines.append(sbatch.directive("no-requeue"))
    return lines


def _launch(
    spec: RunSpec, options: SlurmOptions, python: str, env: dict[str, str], image: str | None
) -> list[str]:
    """``srun`` starting one `repro.runtime.node` task per node (in ``image`` when given)."""
    job_dir = spec.runtime_dir / JOB_DIR
    srun = ["srun", "--kill-on-bad-exit=1", f"--nodes={options.nodes}", "--ntasks-per-node=1"]
    if spec.nproc_per_node > 1:
        srun.append(f"--cpus-per-task={spec.nproc_per_node}")
    srun += [f"--output={job_dir}/node%n.out", f"--error={job_dir}/node%n.err", "--open-mode=append"]
    launcher = [python, "-S", "-m", "repro.runtime.node", f"--nodes={options.nodes}",
                f"--nproc-per-node={spec.nproc_per_node}", f"--facts={job_dir}",
                f"--log-dir={spec.runtime_dir / NODE_LOGS}"]  # fmt: skip
    if image:
        _, package_parent = runtime_source()
        binds = sorted(
            {str(spec.project_root), str(package_parent), str(spec.data_root or spec.project_root)}
        )
        names = sorted({*env, RESUMED_FROM_ENV} if options.requeue else set(env))
        launcher += [f"--image={image}", f"--bind={','.join(binds)}", f"--pass-env={','.join(names)}"]
    return [*srun, *launcher]


# --------------------------------------------------------------------------- following the job


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
        self.image: str | None = None  # the run's image, when the nodes run it (environment docker)

    def prepare(self, spec: RunSpec, on_event: OnEvent) -> BuiltImage | None:
        """Check that a controller answers and note its version; with environment docker, build
        or reuse the run's image (the nodes use this machine's engine, or one that has the image).

        Raises:
            BackendUnavailable: no Slurm commands, no controller answers, no Docker engine.
            UsageError: GPUs asked for (not supported on this backend yet); docker without a lock.
            BuildError: the image could not be built.
        """
        if spec.gpus:
            raise UsageError(
                "--gpus with --backend slurm is not supported yet",
                hint="ask for GPUs with --sbatch-arg=--gpus-per-node=N",
            )
        self.version = slurm_version()
        if self.options.environment != "docker":
            return None
        if spec.lockfile is None:
            raise UsageError(
                "--node-env docker builds the image from the lock; the project declares no dependencies",
                hint="add a requirements.in (or pyproject dependencies), or use --node-env python",
            )
        from repro.backends.docker import DockerBackend

        built = DockerBackend().prepare(spec, on_event)
        self.image = built.id or built.tag
        return built

    def environment(self, spec: RunSpec) -> dict[str, str]:
        """The variables the job exports: the run's own, and where the runtime and project are."""
        inject, package_parent = runtime_source()
        env = dict(spec.env)
        extra = os.environ.get("PYTHONPATH")
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
        script.write_text(job_script(spec, self.options, sys.executable, env, run_id, self.image))
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


# --------------------------------------------------------------------------- after the job


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
