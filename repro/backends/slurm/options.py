"""What a run asks of Slurm: nodes, partition, time, account, extra sbatch arguments, requeue,
what runs the command on the nodes; checked against the shapes repro passes to sbatch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from repro.backends.slurm import sbatch
from repro.errors import CapsuleInvalid, UsageError
from repro.store.capsule import RECORD_NAME
from repro.store.record import Record


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

    def task_cpus(self, per_node: int) -> int:
        """The CPUs each node's task gets: the ``--cpus-per-task`` of the extra sbatch arguments (the last
        one, as sbatch reads them), else one a rank, as repro asks."""
        for arg in reversed(self.sbatch_args):
            name, _, value = arg.partition("=")
            if name == "--cpus-per-task" and value.isdigit() and int(value) > 0:
                return int(value)
        return max(per_node, 1)

    def as_dict(self) -> dict[str, Any]:
        """What the record keeps of them (``backend.details["slurm"]["options"]``)."""
        return {
            "nodes": self.nodes, "partition": self.partition, "time": self.time, "account": self.account,
            "sbatch_args": list(self.sbatch_args), "requeue": self.requeue, "environment": self.environment,
        }  # fmt: skip


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
