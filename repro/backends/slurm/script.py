"""The batch script of a run: its ``#SBATCH`` directives, the environment it scrubs, and the
``srun`` line that starts one task per node.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from repro.backends.base import (
    RunSpec,
    runtime_source,
)
from repro.backends.slurm import sbatch
from repro.backends.slurm.images import storage_base
from repro.backends.slurm.options import SlurmOptions, checked
from repro.collect.checkpoints import RESUMED_FROM_ENV
from repro.errors import UsageError
from repro.runtime import contract

JOB_DIR = "slurm"  # under the runtime dir: the batch script, the job's and each node's output
NODE_LOGS = "ranks-by-node"  # torchrun's per-rank logs, one directory per node, before renumbering
_SCRUB = ("RANK", "WORLD_SIZE", "LOCAL_RANK", contract.BOOT_PID_ENV, "PYTHONSTARTUP")


def job_script(
    spec: RunSpec,
    options: SlurmOptions,
    python: str,
    env: dict[str, str],
    run_id: str,
    image: str | None = None,
    archive: Path | None = None,
) -> str:
    """The batch script of one run (pure: the same inputs give the same text).

    With ``image`` every node's task runs the command in that image (``docker run``, or rootless
    ``podman run`` with the image loaded from ``archive`` into the node's own storage; host network,
    the project, the runtime and the data mounted at their own paths).
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
            f'export {contract.ATTEMPT_ENV}="${{SLURM_RESTART_COUNT:-0}}"',
        ]
    lines += [
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "addr=$(scontrol show node \"$head\" -o | tr ' ' '\\n' | sed -n 's/^NodeAddr=//p')",
        'port=$((20000 + SLURM_JOB_ID % 20000))',
        'echo "repro: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, restart ${SLURM_RESTART_COUNT:-0},'
        ' first node $head (${addr:-$head}:$port)"',
    ]  # fmt: skip
    command = " ".join(q(a) for a in _launch(spec, options, python, env, image, archive))
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
    spec: RunSpec, options: SlurmOptions, python: str, env: dict[str, str], image: str | None,
    archive: Path | None = None,
) -> list[str]:  # fmt: skip
    """``srun`` starting one `repro.runtime.node` task per node (in ``image`` when given)."""
    job_dir = spec.runtime_dir / JOB_DIR
    srun = ["srun", "--kill-on-bad-exit=1", f"--nodes={options.nodes}", "--ntasks-per-node=1"]
    cpus = options.task_cpus(spec.nproc_per_node)
    if cpus > 1:  # a step does not inherit the job's count
        srun.append(f"--cpus-per-task={cpus}")
    srun += [f"--output={job_dir}/node%n.out", f"--error={job_dir}/node%n.err", "--open-mode=append"]
    launcher = [python, "-S", "-m", "repro.runtime.node", f"--nodes={options.nodes}",
                f"--nproc-per-node={spec.nproc_per_node}", f"--facts={job_dir}",
                f"--log-dir={spec.runtime_dir / NODE_LOGS}"]  # fmt: skip
    if image:
        _, package_parent = runtime_source()
        binds = sorted(
            {str(spec.project_root), str(package_parent), str(spec.data_root or spec.project_root)}
        )
        names = sorted({*env, RESUMED_FROM_ENV, contract.ATTEMPT_ENV} if options.requeue else set(env))
        launcher += [f"--image={image}", f"--bind={','.join(binds)}", f"--pass-env={','.join(names)}"]
        if options.environment == "podman":
            launcher += ["--engine=podman", f"--storage={storage_base()}"]
            launcher += [f"--archive={archive}"] if archive else []
    return [*srun, *launcher]
