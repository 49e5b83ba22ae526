#!/usr/bin/env bash
# Make sure a local two-node Slurm cluster answers: one slurmctld and two slurmd
# daemons (n1, n2) on this machine, loopback addresses only, for the slurm-marked tests.
#
# Fast and idempotent when it already answers. Otherwise, as root with apt: install
# slurm-wlm and munge, write /etc/slurm/slurm.conf (only when absent or written by this
# script before), start munged, slurmctld and `slurmd -N n1` / `slurmd -N n2` with a
# per-node spool directory and pid file (%n), and wait until both nodes are idle.
# Logs: /var/log/repro-slurm/. Stop it with scripts/slurm-down.sh.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

conf="${SLURM_CONF:-/etc/slurm/slurm.conf}"
state="${REPRO_SLURM_STATE:-/var/lib/repro-slurm}"
logs="${REPRO_SLURM_LOGS:-/var/log/repro-slurm}"
run="/run/repro-slurm"
marker="# written by repro scripts/slurm-up.sh"
wait_s="${REPRO_SLURM_WAIT:-60}"

say() { echo "slurm-up: $*" >&2; }

nodes_idle() {
    # Both nodes known and usable (idle, or busy with someone's job).
    command -v sinfo >/dev/null 2>&1 || return 1
    local states
    states="$(timeout 10 sinfo -h -N -n n1,n2 -o '%N %t' 2>/dev/null | sort -u)" || return 1
    [ "$(echo "$states" | grep -cE '^n[12] (idle|mix|alloc|comp)')" = 2 ]
}

if nodes_idle; then
    say "the local cluster answers (n1, n2)"
    exit 0
fi

if ! apt_can_install; then
    say "no local Slurm cluster answers, and one can only be set up as root with apt"
    say "the slurm-marked tests skip; on a real cluster, run repro where sbatch works"
    exit 3
fi

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 \
    || ! command -v munged >/dev/null 2>&1 || ! command -v sbatch >/dev/null 2>&1; then
    say "installing slurm-wlm and munge"
    apt_install slurm-wlm munge
fi

if [ -f "$conf" ] && ! grep -qF "$marker" "$conf"; then
    say "$conf exists and was not written by this script; not touching it"
    say "this machine looks like part of a real cluster: use it directly"
    exit 3
fi

mkdir -p "$(dirname "$conf")" "$state/ctld" "$state/d" "$logs" "$run"
host="$(hostname -s)"
cpus=1  # one CPU per node: two 1-CPU tasks fit on the 2-core CI machine
cat >"$conf.tmp" <<EOF
$marker
# A two-node test cluster on one machine: n1 and n2 are two slurmd daemons on loopback ports.
ClusterName=repro
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=6817
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/d/%n
SlurmctldPidFile=$run/slurmctld.pid
SlurmdPidFile=$run/slurmd-%n.pid
SlurmctldLogFile=$logs/slurmctld.log
SlurmdLogFile=$logs/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
MinJobAge=3600
KillWait=10
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
SchedulerParameters=sched_interval=2
NodeName=n1 NodeAddr=127.0.0.1 NodeHostname=$host Port=17001 CPUs=$cpus State=UNKNOWN
NodeName=n2 NodeAddr=127.0.0.1 NodeHostname=$host Port=17002 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
EOF
if ! cmp -s "$conf.tmp" "$conf" 2>/dev/null; then
    mv "$conf.tmp" "$conf"
    restart=1
else
    rm -f "$conf.tmp"
    restart=0
fi

# munge: a key (the package makes one; make one if it did not) and the daemon as its own user.
if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge:munge /etc/munge/munge.key 2>/dev/null || true
    chmod 400 /etc/munge/munge.key
fi
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    say "starting munged"
    if id munge >/dev/null 2>&1; then
        runuser -u munge -- /usr/sbin/munged
    else
        /usr/sbin/munged --force
    fi
fi

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if [ "$restart" = 1 ]; then
    for f in "$run"/slurmd-n1.pid "$run"/slurmd-n2.pid "$run"/slurmctld.pid; do
        pid_alive "$f" && kill "$(cat "$f")" 2>/dev/null || true
    done
    sleep 1
fi
if ! pid_alive "$run/slurmctld.pid"; then
    say "starting slurmctld"
    slurmctld -c -f "$conf"
fi
for n in n1 n2; do
    mkdir -p "$state/d/$n"
    if ! pid_alive "$run/slurmd-$n.pid"; then
        say "starting slurmd -N $n"
        slurmd -N "$n" -f "$conf"
    fi
done

for _ in $(seq "$wait_s"); do
    if nodes_idle; then
        say "the local cluster is up: $(sinfo -h -o '%P %D nodes %t' | tr '\n' ' ')"
        exit 0
    fi
    # Nodes that were down when slurmctld last saw them come back at once.
    scontrol update NodeName=n1,n2 State=RESUME >/dev/null 2>&1 || true
    sleep 1
done
say "the nodes did not come up within ${wait_s}s; see $logs/"
sinfo -N >&2 || true
exit 3
