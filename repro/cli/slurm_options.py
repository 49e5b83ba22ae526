"""The options of `repro run --backend slurm`: the allocation asked of sbatch."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from repro.config import Settings
from repro.errors import UsageError


@dataclass(frozen=True)
class SlurmFlags:
    """What was given on the command line; None (or empty) falls back to repro.yaml's `slurm:`."""

    nodes: int | None
    partition: str | None
    time_limit: str | None
    account: str | None
    sbatch_args: tuple[str, ...]
    requeue: bool | None

    def given(self) -> list[str]:
        names = {"nodes": "--nodes", "partition": "--partition", "time_limit": "--time",
                 "account": "--account", "sbatch_args": "--sbatch-arg", "requeue": "--requeue"}  # fmt: skip
        return [flag for name, flag in names.items() if getattr(self, name) not in (None, ())]

    def settings(self, base: Settings, backend: str) -> Settings:
        """Apply the flags to the settings.

        Raises:
            UsageError: Slurm options given for another backend.
        """
        if backend != "slurm" and self.given():
            raise UsageError(
                f"{', '.join(self.given())} only apply to --backend slurm",
                hint="add --backend slurm (or `backend: slurm` in repro.yaml)",
            )
        return base.with_overrides(
            slurm_nodes=self.nodes, slurm_partition=self.partition, slurm_time=self.time_limit,
            slurm_account=self.account, slurm_sbatch_args=self.sbatch_args or None,
            slurm_requeue=self.requeue,
        )  # fmt: skip


_FIELDS = tuple(SlurmFlags.__dataclass_fields__)


def slurm_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add the Slurm options; the command receives them as `slurm: SlurmFlags`."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["slurm"] = SlurmFlags(**{name: kwargs.pop(name) for name in _FIELDS})
        return f(*args, **kwargs)

    for option in reversed(
        [
            click.option(
                "--nodes", type=click.IntRange(1), default=None,
                help="Slurm: nodes to run on; torchrun on each, --nproc-per-node ranks per node.",
            ),
            click.option("--partition", default=None, help="Slurm: the partition (sbatch --partition)."),
            click.option(
                "--time", "time_limit", default=None, metavar="LIMIT",
                help="Slurm: the job's time limit (sbatch --time, e.g. 00:30:00).",
            ),
            click.option("--account", default=None, help="Slurm: the account to charge (sbatch --account)."),
            click.option(
                "--sbatch-arg", "sbatch_args", multiple=True, metavar="ARG",
                help="Slurm: one more sbatch argument, as given (repeatable), e.g. --sbatch-arg=--qos=high.",
            ),
            click.option(
                "--requeue/--no-requeue", default=None,
                help="Slurm: requeue on preemption or `scontrol requeue`; SIGUSR1 reaches the command "
                "120 s before the time limit, so it can save a checkpoint and continue from it.",
            ),
        ]
    ):  # fmt: skip
        wrapper = option(wrapper)
    return wrapper
