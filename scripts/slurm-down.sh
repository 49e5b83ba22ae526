#!/usr/bin/env bash
# Stop the local two-node Slurm cluster that scripts/slurm-up.sh started (its daemons
# only, found by their pid files). munged and the packages stay; idempotent.
set -euo pipefail

run="/run/repro-slurm"
for f in "$run"/slurmd-n1.pid "$run"/slurmd-n2.pid "$run"/slurmctld.pid; do
    [ -f "$f" ] || continue
    pid="$(cat "$f")"
    if kill -0 "$pid" 2>/dev/null; then
        echo "slurm-down: stopping $(basename "$f" .pid) ($pid)" >&2
        kill "$pid"
        for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    fi
    rm -f "$f"
done
echo "slurm-down: the local cluster is stopped" >&2
