"""The slurm backend's pure parts: the batch script, reading scontrol, blaming a failed node."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from repro.backends.base import RunSpec, launch_argv
from repro.backends.slurm.backend import _renumber_rank_logs, failed_task
from repro.backends.slurm.commands import parse_job, parse_sacct
from repro.backends.slurm.options import SlurmOptions
from repro.backends.slurm.script import NODE_LOGS, job_script
from repro.runtime.contract import RANK_LOGS


def _spec(tmp_path: Path, nproc: int = 1) -> RunSpec:
    return RunSpec(
        argv=["python", "train.py", "--name", "two words"], project_root=tmp_path / "proj", workdir="sub",
        env={}, runtime_dir=tmp_path / "rt", stdout_path=tmp_path / "o", stderr_path=tmp_path / "e",
        nproc_per_node=nproc,
    )  # fmt: skip


def test_the_batch_script_asks_for_the_allocation_and_runs_one_launcher_per_node(tmp_path: Path) -> None:
    options = SlurmOptions(nodes=2, partition="gpu", time="00:30:00", account="lab", sbatch_args=("--qos=x",))
    text = job_script(_spec(tmp_path, nproc=2), options, "/venv/bin/python", {"A": "x y", "B": "$HOME"}, "r1")
    lines = text.splitlines()
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --cpus-per-task=2",
                 "#SBATCH --partition=gpu", "#SBATCH --time=00:30:00", "#SBATCH --account=lab",
                 "#SBATCH --no-requeue", f"#SBATCH --chdir={tmp_path / 'proj' / 'sub'}",
                 "export A='x y'", "export B='$HOME'"):  # fmt: skip
        assert line in lines, line
    srun = next(line for line in lines if line.startswith("srun "))
    assert "--kill-on-bad-exit=1" in srun and "/venv/bin/python -S -m repro.runtime.node --nodes=2" in srun
    assert srun.endswith("-- python train.py --name 'two words'")
    assert "--qos=x" not in text  # extra arguments go on sbatch's command line, parsed once
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_the_job_step_gets_the_cpus_per_task_asked_or_one_a_rank(tmp_path: Path) -> None:
    def srun(options: SlurmOptions, nproc: int) -> str:
        text = job_script(_spec(tmp_path, nproc=nproc), options, "python", {}, "r1")
        return next(line for line in text.splitlines() if line.startswith("srun "))

    assert "--cpus-per-task=2 " in srun(SlurmOptions(), 2)  # one a rank
    assert "--cpus-per-task" not in srun(SlurmOptions(), 1)
    asked = SlurmOptions(sbatch_args=("--cpus-per-task=4", "--cpus-per-task=16"))  # sbatch reads the last
    assert asked.task_cpus(2) == 16 and "--cpus-per-task=16 " in srun(asked, 2)
    assert SlurmOptions(sbatch_args=("--qos=x",)).task_cpus(3) == 3


def test_requeue_traps_the_warning_signal_and_requeues_after_the_command_saved(tmp_path: Path) -> None:
    text = job_script(_spec(tmp_path), SlurmOptions(requeue=True), "python", {}, "r1")
    assert "#SBATCH --requeue" in text and "#SBATCH --signal=B:USR1@120" in text
    assert "trap requeue USR1" in text and 'scontrol requeue "$SLURM_JOB_ID"' in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


@pytest.mark.parametrize(
    ("restart", "before", "after"), [("", "", ""), ("0", "", ""), ("1", "", "r1"), ("2", "r0", "r0")]
)
def test_a_restarted_job_resumes_its_own_run_or_the_one_it_resumes(
    tmp_path: Path, restart: str, before: str, after: str
) -> None:
    """The script's own lines, run by bash: restarts set REPRO_RESUMED_FROM, first starts do not."""
    text = job_script(_spec(tmp_path), SlurmOptions(requeue=True), "python", {}, "r1")
    lines = text.splitlines()
    start = lines.index('if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then')
    snippet = "\n".join(
        [*lines[start : start + 4], 'printf "%s %s" "${REPRO_RESUMED_FROM:-}" "$REPRO_ATTEMPT"']
    )
    env = {"PATH": "/usr/bin:/bin", "REPRO_RUN_ID": "r1", "SLURM_RESTART_COUNT": restart}
    if before:
        env["REPRO_RESUMED_FROM"] = before
    out = subprocess.run(["bash", "-c", snippet], env=env, capture_output=True, text=True, check=True)
    assert out.stdout == f"{after} {restart or 0}"  # each start of the job knows which it is
    plain = job_script(_spec(tmp_path), SlurmOptions(), "python", {}, "r1")
    assert "REPRO_RESUMED_FROM" not in plain  # a job that is never requeued never restarts


def test_scontrol_show_job_is_read_field_by_field() -> None:
    line = ("JobId=8 JobName=repro-x UserId=root(0) JobState=PENDING Reason=BeginTime Requeue=1 Restarts=1 "
            "ExitCode=0:15 Partition=debug NodeList=(null) TRES=cpu=2,node=2\n")  # fmt: skip
    state = parse_job(line)
    assert state is not None
    assert (state.state, state.reason, state.restarts, state.exit_code, state.signal) == (
        "PENDING",
        "BeginTime",
        1,
        0,
        15,
    )
    assert state.nodes is None and state.partition == "debug" and state.active
    assert parse_job("slurm_load_jobs error: Invalid job id specified\n") is None


def test_the_first_task_srun_saw_fail_is_blamed() -> None:
    job_out = (
        "repro: job 4 on n[1-2]\n"
        "srun: error: n2: task 1: Exited with exit code 3\n"
        "srun: error: n1: task 0: Exited with exit code 1\n"
    )
    assert failed_task(job_out, {0: "n1", 1: "n2"}) == {"node": "n2", "node_rank": 1, "exit_code": 3}
    assert failed_task("srun: error: n1: task 0: Terminated\n", {0: "n1"}) is None


def test_each_nodes_rank_logs_are_renumbered_by_global_rank(tmp_path: Path) -> None:
    for node in (0, 1):
        for local in (0, 1):
            d = tmp_path / NODE_LOGS / f"node{node}" / "none_abc" / "attempt_0" / str(local)
            d.mkdir(parents=True)
            (d / "stdout.log").write_text(f"node {node} local {local}\n")
    _renumber_rank_logs(tmp_path, nproc_per_node=2)
    found = {p.parent.name: p.read_text() for p in (tmp_path / RANK_LOGS).glob("*/attempt_0/*/stdout.log")}
    assert found == {"0": "node 0 local 0\n", "1": "node 0 local 1\n", "2": "node 1 local 0\n",
                     "3": "node 1 local 1\n"}  # fmt: skip


def test_torchrun_across_nodes_uses_a_static_rendezvous_on_the_first_node() -> None:
    argv = launch_argv(
        ["python", "train.py"], 1, python="py", nodes=2, node_rank=1, master=("10.0.0.1", 20004)
    )
    assert argv == ["py", "-m", "torch.distributed.run", "--nproc-per-node=1", "--nnodes=2", "--node-rank=1",
                    "--master-addr=10.0.0.1", "--master-port=20004", "train.py"]  # fmt: skip


def test_a_job_the_controller_forgot_is_read_from_accounting() -> None:
    state = parse_sacct("CANCELLED by 0|0:15|n[1-2]|debug\n")
    assert state is not None and not state.active
    assert (state.state, state.exit_code, state.signal, state.nodes) == ("CANCELLED", 0, 15, "n[1-2]")
    assert parse_sacct("") is None


def test_with_an_image_each_node_runs_the_command_in_a_container_at_the_same_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from repro.runtime.node import container_argv

    text = job_script(_spec(tmp_path), SlurmOptions(environment="docker"), "py", {"REPRO_SEED": "1"}, "r1",
                      image="sha256:abc")  # fmt: skip
    srun = next(line for line in text.splitlines() if line.startswith("srun "))
    assert "--image=sha256:abc" in srun and "--pass-env=REPRO_SEED" in srun and str(tmp_path / "proj") in srun
    requeue = SlurmOptions(environment="docker", requeue=True)
    text = job_script(_spec(tmp_path), requeue, "py", {"REPRO_SEED": "1"}, "r1", image="sha256:abc")
    # a restart's resume, and which start it is, reach the container
    assert "--pass-env=REPRO_ATTEMPT,REPRO_RESUMED_FROM,REPRO_SEED" in text

    monkeypatch.setenv("REPRO_RUN_ID", "r1")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    argv = container_argv("sha256:abc", ["/p", "/lib"], ["REPRO_SEED"], node_rank=1)
    assert argv[:3] == ["docker", "run", "--rm"] and argv[-1] == "sha256:abc"
    assert "--name=repro-r1-node1-2" in argv and "--network=host" in argv
    assert "--volume=/p:/p" in argv and "--volume=/lib:/lib" in argv and "--env=REPRO_SEED" in argv


def test_with_podman_each_node_loads_the_archive_into_its_own_storage_and_runs_rootless(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from repro.runtime.node import container_argv, node_storage

    archive = tmp_path / "store" / "node-images" / "abc.tar"
    options = SlurmOptions(environment="podman", nodes=2)
    text = job_script(_spec(tmp_path), options, "py", {"REPRO_SEED": "1"}, "r1", "sha256:abc", archive)
    srun = next(line for line in text.splitlines() if line.startswith("srun "))
    assert "--engine=podman" in srun and f"--archive={archive}" in srun
    assert "--storage=/tmp/repro-podman-" in srun
    monkeypatch.setenv("SLURMD_NODENAME", "n2")
    storage = node_storage("/tmp/repro-podman-7")
    assert storage == "/tmp/repro-podman-7/n2"  # one storage per node, so each loads the image once
    monkeypatch.setattr("os.getuid", lambda: 1001)
    argv = container_argv("sha256:abc", ["/p"], ["REPRO_SEED"], 0, engine="podman", storage=storage)
    assert argv[:4] == ["podman", f"--root={storage}/root", f"--runroot={storage}/run", "run"]
    assert "--userns=keep-id" in argv and "--network=host" in argv and "--ipc=host" not in argv
    assert argv[-1] == "sha256:abc"
