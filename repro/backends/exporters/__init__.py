"""A run as the input of a cluster engine repro does not drive: a Slurm batch script, Kubernetes manifests.

Pure functions: a record (and an image reference) in, text or manifests out. Nothing here
submits anything.
"""

from __future__ import annotations

from repro.facts.determinism import run_environment
from repro.runtime import contract
from repro.store.record import Record


def export_env(record: Record) -> dict[str, str]:
    """The variables that carry the run's seeds and determinism mode, as a replay sets them."""
    env = run_environment(record)
    env.pop(contract.RUN_ID_ENV, None)
    env["REPRO_REPLAY_OF"] = record.id
    return dict(sorted(env.items()))


def layout(record: Record) -> tuple[int, int]:
    """(nodes, processes per node) of the run."""
    return max(1, record.command.nodes), max(1, record.command.nproc_per_node)


def script_args(record: Record) -> list[str]:
    """The command without its interpreter: what follows `python` or torchrun's options."""
    argv = record.command.executed()
    if argv and argv[0].rsplit("/", 1)[-1].startswith("python"):
        return argv[1:]
    return argv
