"""The CPUs a run may use: the affinity mask capped by the cgroup CPU quota, from files under a fake root."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.backends.registry import cpus_here, task_cpus
from repro.facts.cpus import default_threads, usable_cpus


def _root(tmp_path: Path, allowed: str, cgroup: str, files: dict[str, str]) -> Path:
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/status").write_text(
        f"Name:\tpython\nCpus_allowed:\tff\nCpus_allowed_list:\t{allowed}\n"
    )
    (tmp_path / "proc/self/cgroup").write_text(cgroup)
    for name, text in files.items():
        path = tmp_path / "sys/fs/cgroup" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("allowed", "expected"),
    [("0-15", 16), ("0", 1), ("0-3,8,10-11", 7), ("2,5", 2)],
)
def test_affinity_mask_counts_without_a_quota(tmp_path: Path, allowed: str, expected: int) -> None:
    root = _root(
        tmp_path,
        allowed,
        "0::/user.slice\n",
        {"cpu.max": "max 100000\n", "user.slice/cpu.max": "max 100000\n"},
    )
    assert usable_cpus(root) == expected


@pytest.mark.parametrize(
    ("quota", "expected"),
    [("400000 100000", 4), ("150000 100000", 2), ("50000 100000", 1), ("3200000 100000", 16)],
)
def test_cgroup_v2_quota_caps_the_mask(tmp_path: Path, quota: str, expected: int) -> None:
    """`docker --cpus 4` writes 400000 100000; a fraction rounds up; a quota above the mask leaves it."""
    root = _root(tmp_path, "0-15", "0::/\n", {"cpu.max": quota + "\n"})
    assert usable_cpus(root) == expected


def test_the_tightest_ancestor_quota_counts(tmp_path: Path) -> None:
    files = {
        "cpu.max": "max 100000\n",
        "slurm/cpu.max": "200000 100000\n",  # the job's cgroup
        "slurm/job_7/step_0/cpu.max": "max 100000\n",  # the step's own: none
    }
    root = _root(tmp_path, "0-63", "0::/slurm/job_7/step_0\n", files)
    assert usable_cpus(root) == 2


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    files = {"cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "300000\n",
             "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
             "cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}  # fmt: skip
    root = _root(tmp_path, "0-7", "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n", files)
    assert usable_cpus(root) == 3


def test_a_container_showing_the_hosts_cgroup_path_reads_its_own_root(tmp_path: Path) -> None:
    """Without a cgroup namespace /proc/self/cgroup names the host's path; the mount is the container's."""
    root = _root(tmp_path, "0-7", "0::/system.slice/docker-abc.scope\n", {"cpu.max": "100000 100000\n"})
    assert usable_cpus(root) == 1


def test_unreadable_files_leave_the_real_affinity(tmp_path: Path) -> None:
    assert usable_cpus(tmp_path) >= 1


def test_the_default_thread_count_shares_the_cpus_among_a_nodes_ranks(tmp_path: Path) -> None:
    root = _root(tmp_path, "0-15", "0::/\n", {"cpu.max": "800000 100000\n"})  # 16 in the mask, 8 by quota
    assert default_threads(1, None, root=root) == 8
    assert default_threads(3, None, root=root) == 2  # torchrun --nproc-per-node 3
    assert default_threads(16, None, root=root) == 1
    assert default_threads(2, 2, root=root) == 1  # a Slurm job: one CPU a rank
    assert default_threads(2, 32, root=root) == 16  # a job's own --cpus-per-task, not this machine's


def test_backends_that_run_here_use_this_machines_cpus() -> None:
    assert cpus_here("local") and cpus_here("docker") and cpus_here("auto")
    assert not cpus_here("slurm")
    assert task_cpus("local", lambda name: {}, 2) is None


def test_a_slurm_jobs_threads_follow_its_cpus_per_task() -> None:
    def section(args: list[str]) -> dict[str, object]:
        return {"nodes": 1, "partition": None, "time": None, "account": None, "sbatch_args": args,
                "requeue": False, "environment": "python"}  # fmt: skip

    assert task_cpus("slurm", lambda name: section([]), 2) == 2  # one a rank, as repro asks
    assert task_cpus("slurm", lambda name: section(["--mem=4G", "--cpus-per-task=8"]), 2) == 8
    assert default_threads(2, task_cpus("slurm", lambda name: section(["--cpus-per-task=8"]), 2)) == 4
