"""The flags of `repro run --backend slurm`: the allocation asked of sbatch (each sets its key of
repro.yaml's ``slurm:`` section, a flag winning) and ``--detach`` (this run only).

Plain data (`repro.backends.flags`): standard library only, named by the registry's slurm entry.
"""

from __future__ import annotations

from repro.backends.flags import Flag, FlagSection
from repro.backends.slurm.sbatch import ENVIRONMENTS

FLAGS = FlagSection(
    "Slurm options (with --backend slurm)",
    (
        Flag(
            "--nodes", "Nodes to run on; torchrun on each, --nproc-per-node ranks per node.",
            takes="count", setting="nodes",
        ),
        Flag("--partition", "The partition (sbatch --partition).", setting="partition"),
        Flag(
            "--time", "The job's time limit (sbatch --time, e.g. 00:30:00).", metavar="LIMIT",
            setting="time",
        ),
        Flag("--account", "The account to charge (sbatch --account).", setting="account"),
        Flag(
            "--sbatch-arg",
            "One more sbatch argument, as given (repeatable), e.g. --sbatch-arg=--qos=high.",
            metavar="ARG", repeat=True, setting="sbatch_args",
        ),
        Flag(
            "--requeue/--no-requeue",
            "Requeue on preemption or `scontrol requeue`; SIGUSR1 reaches the command "
            "120 s before the time limit, so it can save a checkpoint; the requeued job continues from "
            "it as `repro resume` does (the RNG states recorded at that save are restored).",
            takes="on/off", setting="requeue",
        ),
        Flag(
            "--node-env",
            "What runs the command on the nodes: python (this interpreter, on a filesystem "
            "the nodes share; default), docker (the run's image, built from its lock) or podman (that "
            "image in rootless Podman, loaded once per node from an archive in the store).",
            choices=ENVIRONMENTS, setting="environment",
        ),
        Flag(
            "--detach",
            "Submit and return at once; `repro ls` shows the run pending or running, "
            "and seals it once the job ended.",
            takes="switch",
        ),
    ),
    detach="detach",
)  # fmt: skip
