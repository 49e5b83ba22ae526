"""The only module that calls sbatch, squeue, scontrol, scancel or sacct: submit a job, ask its
state, cancel it, expand a node list, read the cluster's version.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from repro.backends.slurm.options import SlurmOptions, checked
from repro.errors import BackendUnavailable, UsageError

_ACTIVE = {
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
    "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD", "STOPPED",
}  # fmt: skip
_HINT = (
    "run repro where `sbatch` and `scontrol ping` work, or start a local test cluster with `make slurm-up`"
)


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
