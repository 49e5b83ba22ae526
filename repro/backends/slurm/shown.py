"""A Slurm run's lines in `repro show`: its job, each node's hardware and ranks, its restores."""

from __future__ import annotations

from typing import Any

from repro.units import human_bytes, plural


def slurm_lines(slurm: dict[str, Any]) -> list[tuple[str, str]]:
    """``slurm  job 16 completed on n[1-2], partition debug, Slurm 22.05.8`` and one line per node."""
    job = (
        f"job {slurm.get('job_id')} {str(slurm.get('state', '?')).lower()} on {slurm.get('node_list') or '-'}"
    )
    job += f", partition {slurm.get('partition') or '-'}, Slurm {slurm.get('version') or '?'}"
    if slurm.get("restarts"):
        job += f", {plural(int(slurm['restarts']), 'restart')}"
    lines = [("slurm", job)]
    ranks: dict[str, list[str]] = {}
    for rank, node in (slurm.get("rank_nodes") or {}).items():
        ranks.setdefault(str(node), []).append(str(rank))
    for name, hw in sorted((slurm.get("node_hardware") or {}).items()):
        memory = human_bytes(int(hw["memory_bytes"])) if hw.get("memory_bytes") else "?"
        gpus = f", {len(hw['gpus'])}× {hw['gpus'][0]}" if hw.get("gpus") else ""
        text = f"{name}: {hw.get('cpu_count')}× {hw.get('cpu_model')}, {memory}{gpus}"
        if ranks.get(name):
            text += f"; rank {', '.join(ranks[name])}"
        lines.append(("node", text))
    for e in slurm.get("restored") or []:  # a requeued job continued from a checkpoint
        lines.append(("requeue", f"rank {e.get('rank')} restored {e.get('path')} at step {e.get('step')}"))
    return lines
