"""A standalone sbatch script that reproduces a run on a user's Slurm cluster."""

from __future__ import annotations

import shlex

from repro.backends.exporters import export_env, layout, script_args
from repro.backends.slurm import sbatch
from repro.errors import CapsuleInvalid
from repro.store.capsule import RECORD_NAME
from repro.store.record import Record
from repro.units import plural


def slurm_script(record: Record, image: str | None = None) -> str:
    """The batch script: the recorded allocation, seeds and mode, torchrun on every node.

    It runs in a checkout of the project at the recorded commit (it says which, and warns
    when HEAD differs); with ``image`` every task runs inside that image through apptainer,
    otherwise with the ``python`` the nodes have.

    Raises:
        CapsuleInvalid: the record's Slurm options are not of a shape repro passes to sbatch.
    """
    nodes, nproc = layout(record)
    asked = record.backend.details.get("slurm", {}).get("options", {}) if record.backend.details else {}
    q = shlex.quote
    code = record.code
    lines = [
        "#!/bin/bash",
        f"# Reproduces repro run {record.id} ({record.created}): {shlex.join(record.command.argv)}",
        f"# {plural(nodes, 'node')} × {plural(nproc, 'process', 'processes')}, "
        f"mode {record.determinism.mode}, seed {record.seeds.master}.",
        "# Submit from a checkout of the project"
        + (f" at commit {code.commit}" if code.commit else "")
        + (" (the run had uncommitted changes: `repro replay` restores them, this script does not)"
           if code.dirty else "") + ":  sbatch job.sbatch",
    ]  # fmt: skip
    for item in record.data.inputs:
        lines.append(f"# data: {item.path} (xxh3-128 {item.digest}) must be present at the same path")
    wanted = {flag: asked.get(flag) for flag in ("partition", "time", "account", "sbatch_args")}
    found = sbatch.problems(wanted)
    if found:
        raise CapsuleInvalid(f"the record's Slurm options: {found[0]}", member=RECORD_NAME)
    lines += [
        sbatch.directive("job-name", f"repro-{record.id}"),
        sbatch.directive("nodes", nodes),
        sbatch.directive("ntasks-per-node", 1),
    ]
    if nproc > 1:
        lines.append(sbatch.directive("cpus-per-task", nproc))
    for flag in ("partition", "time", "account"):
        if wanted[flag]:
            lines.append(sbatch.directive(flag, wanted[flag]))
    extra = wanted["sbatch_args"]
    lines += sbatch.arg_directives([str(a) for a in extra] if isinstance(extra, list) else [])
    lines += ["", "set -euo pipefail", 'cd "$SLURM_SUBMIT_DIR"']
    if code.commit:
        lines += [
            f"recorded={code.commit}",
            'if [ "$(git rev-parse HEAD 2>/dev/null)" != "$recorded" ]; then',
            '    echo "warning: this checkout is not at the recorded commit $recorded" >&2',
            "fi",
        ]
    lines += [f"cd {q(record.command.cwd)}", "", "# seeds and determinism mode, as repro set them"]
    lines += [f"export {k}={q(v)}" for k, v in export_env(record).items()]
    runner = f"apptainer exec docker://{image} python" if image else "python"
    lines += [
        "",
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        'port=$((20000 + SLURM_JOB_ID % 20000))',
    ]  # fmt: skip
    args = shlex.join(script_args(record))
    if nodes * nproc == 1:
        lines.append(f"srun --kill-on-bad-exit=1 {runner} {args}")
    else:
        # Static rendezvous on the first node: node k holds ranks k*N … k*N+N-1, as in the run.
        torchrun = (f"exec {runner} -m torch.distributed.run --nproc-per-node={nproc} --nnodes={nodes} "
                    f'--node-rank=$SLURM_NODEID --master-addr=$0 --master-port=$1 {args}')  # fmt: skip
        lines.append(f'srun --kill-on-bad-exit=1 bash -c {q(torchrun)} "$head" "$port"')
    return "\n".join(lines) + "\n"
