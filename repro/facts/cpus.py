"""The CPUs a run may use: the process's affinity mask, capped by its cgroup's CPU quota.

The affinity mask is what `taskset`, `numactl`, Slurm's task/affinity or task/cgroup (its
`--cpus-per-task`) and `docker --cpuset-cpus` leave the process; the quota is what `docker --cpus`,
Kubernetes' CPU limit and systemd's ``CPUQuota=`` give it (cgroup v2 ``cpu.max``, v1
``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``, the tightest of the process's cgroup and its
ancestors). A fractional quota rounds up (1.5 CPUs → 2), as the JVM and Go runtimes do. Every file
is read under ``root`` so that tests can hand it a fake one.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

_V1_CONTROLLERS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")


def usable_cpus(root: Path = Path("/")) -> int:
    """How many CPUs this process may run on at once (at least 1)."""
    cpus = _affinity(root)
    quota = _quota(root)
    if quota is not None:
        cpus = min(cpus, quota)
    return max(1, cpus)


def _affinity(root: Path) -> int:
    """The CPUs in the process's affinity mask (``Cpus_allowed_list`` of /proc/self/status)."""
    try:
        for line in (root / "proc/self/status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return _count_list(line.split(":", 1)[1])
    except (OSError, ValueError):
        pass
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _count_list(text: str) -> int:
    """``0-3,8,10-11`` → 7."""
    count = 0
    for part in text.strip().split(","):
        low, _, high = part.strip().partition("-")
        count += int(high or low) - int(low) + 1
    return count


def _quota(root: Path) -> int | None:
    """The CPU quota of the process's cgroup and its ancestors, in whole CPUs (None: no quota)."""
    try:
        lines = (root / "proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    limits: list[float] = []
    for line in lines:
        if line.count(":") < 2:
            continue
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2: one hierarchy
            limits += _walk(root / "sys/fs/cgroup", path, _v2_limit)
        elif controllers in _V1_CONTROLLERS:
            for mount in _V1_CONTROLLERS:
                limits += _walk(root / "sys/fs/cgroup" / mount, path, _v1_limit)
    return math.ceil(min(limits) - 1e-9) if limits else None


def _walk(mount: Path, path: str, read: Callable[[Path], float | None]) -> list[float]:
    """The limits ``read`` finds from the cgroup ``path`` up to ``mount`` (in a container, whose
    cgroup namespace may show the host's path, from ``mount`` itself when ``path`` is not under it)."""
    here = mount / path.strip("/")
    if not here.is_dir():
        here = mount
    found: list[float] = []
    while True:
        limit = read(here)
        if limit is not None:
            found.append(limit)
        if here == mount or mount not in here.parents:
            return found
        here = here.parent


def _v2_limit(directory: Path) -> float | None:
    """``cpu.max`` of cgroup v2: ``max 100000`` (none) or ``200000 100000`` (2 CPUs)."""
    try:
        quota, period = (directory / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else _ratio(int(quota), int(period))
    except (OSError, ValueError):
        return None


def _v1_limit(directory: Path) -> float | None:
    """``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` of cgroup v1 (a quota of -1: none)."""
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
        return None if quota < 0 else _ratio(quota, period)
    except (OSError, ValueError):
        return None


def _ratio(quota: int, period: int) -> float | None:
    return quota / period if quota > 0 and period > 0 else None


def default_threads(per_node: int, task_cpus: int | None, root: Path = Path("/")) -> int:
    """Strict and gpu mode's intra-op threads when none is given: the CPUs of a node's task shared by
    its ``per_node`` processes (torchrun's ranks). The task's CPUs are this machine's usable ones, or
    ``task_cpus`` where they are elsewhere (a Slurm job: its --cpus-per-task, one a rank unless asked)."""
    cpus = usable_cpus(root) if task_cpus is None else task_cpus
    return max(1, cpus // max(1, per_node))
