"""`--backend slurm` on a real Slurm cluster: `make slurm-up` starts two slurmd nodes (n1, n2) here.

Real jobs through sbatch, real torchrun across the two nodes (gloo), replayed on one
machine and compared byte for byte; a job requeued with `scontrol requeue` mid-run; a
cancelled job; a rank failing on one node. Kept few and small: the CI machine has 2 cores.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repro.store.hashing import hash_file
from repro.store.record import Record
from repro.store.runs import Store
from tests.conftest import REPO, Project

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _cluster_nodes() -> list[str]:
    if shutil.which("sbatch") is None or shutil.which("scontrol") is None:
        return []
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=20)
    if ping.returncode != 0 or "UP" not in ping.stdout:
        return []
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, timeout=20
    ).stdout
    return sorted({line.split()[0] for line in out.splitlines() if line.split()[1:2] != ["down"]})


@pytest.fixture(scope="module")
def nodes() -> list[str]:
    found = _cluster_nodes()
    if not found:
        pytest.skip("no Slurm cluster answers (`make slurm-up` starts a local two-node one, as root)")
    return found


def _train_project(project: Project) -> None:
    shutil.copyfile(REPO / "recipes" / "slurm" / "train.py", project.root / "train.py")  # the recipe's script
    project.points()
    project.write(".gitignore", "outputs/\ncheckpoints/\n")
    project.commit("train")


def _record(project: Project, ref: str = "latest") -> Record:
    return Store(project.root).resolve(ref).record


def _output_hash(record: Record, path: str) -> str:
    return next(o.hash for o in record.results.outputs if o.path == path)


def _slurm_run(project: Project, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "repro", "run", "--backend", "slurm", "--data", "data", *args],
        cwd=project.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip


def _job_of_running_run(project: Project, timeout: float = 60) -> tuple[str, str]:
    """(run id, job id) of the one run in progress, once Slurm runs its job."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = list((project.root / ".repro" / "runs").glob("*/running.json"))
        if running:
            run_id = running[0].parent.name
            out = subprocess.run(["squeue", "-h", "-n", f"repro-{run_id}", "-o", "%i %T"],
                                 capture_output=True, text=True).stdout.split()  # fmt: skip
            if out[1:2] == ["RUNNING"]:
                return run_id, out[0]
        time.sleep(0.3)
    raise AssertionError("no job of the run started running")


def _wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _job_state(job_id: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True).stdout
    return next((f.split("=", 1)[1] for f in out.split() if f.startswith("JobState=")), "")


def test_a_single_node_run_replays_identical_locally_and_on_slurm(project: Project, nodes: list[str]) -> None:
    _train_project(project)
    train = ["python", "train.py", "--save", "outputs/model.pt"]
    r = project.repro(
        "run", "--backend", "slurm", "--data", "data", "--", *train, "--ckpt-dir", "checkpoints/a"
    )
    assert r.code == 0, r.err
    assert "rank 0 epoch 2 loss" in r.out  # the job's stdout, live, on repro's stdout
    straight = _record(project)
    slurm = straight.backend.details["slurm"]
    assert straight.backend.name == "slurm" and slurm["state"] == "COMPLETED" and slurm["job_id"].isdigit()
    assert slurm["partition"] and slurm["version"][0].isdigit() and slurm["nodes"][0] in nodes
    hardware = slurm["node_hardware"][slurm["nodes"][0]]
    assert hardware["cpu_count"] >= 1 and hardware["memory_bytes"] > 0 and hardware["cpu_model"]

    r = project.repro("replay", straight.id, "--backend", "local", "--json")
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
    r = project.repro("replay", straight.id, "--json")  # where it ran: on Slurm, the same allocation
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
    again = _record(project)
    assert again.backend.name == "slurm" and again.backend.details["slurm"]["job_id"] != slurm["job_id"]


@pytest.mark.serial  # a requeue restarts the job while the old step completes: on a loaded machine Slurm
# can fail that restart (exit 1), so it runs alone, after the parallel tests
def test_a_requeued_job_continues_as_repro_resume_and_ends_with_the_weights_of_an_uninterrupted_run(
    project: Project, nodes: list[str]
) -> None:
    """A script that checkpoints model, optimizer, scheduler and epoch but no RNG state (shuffling
    DataLoader with workers, random augmentation, dropout), requeued with `scontrol requeue` after
    its first checkpoint: the restarted job restores the RNG states recorded at that save."""
    project.script("resumable_train.py", "train.py")
    project.points(n=32)
    project.write(".gitignore", "outputs/\ncheckpoints/\n")
    project.commit("train")
    train = ["python", "train.py", "--epochs", "3", "--workers", "1"]
    r = project.repro("run", "--backend", "local", "--data", "data", "--", *train,
                      "--ckpt-dir", "checkpoints/straight", "--save", "outputs/model.pt")  # fmt: skip
    assert r.code == 0, r.err
    straight = _record(project)

    proc = _slurm_run(project, "--requeue", "--", *train, "--ckpt-dir", "checkpoints/requeued",
                      "--save", "outputs/model.pt", "--epoch-sleep", "2")  # fmt: skip
    run_id, job = _job_of_running_run(project)
    _wait_for((project.root / "checkpoints/requeued/last.pt").is_file, 120, "the first checkpoint")
    subprocess.run(["scontrol", "requeue", job], check=True)
    _wait_for(lambda: _job_state(job) == "PENDING", 30, "the requeued job to be pending")
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)  # no 2-minute wait
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "=> resuming from checkpoints/requeued/last.pt" in out + err  # the script's own output
    requeued = _record(project, run_id)
    slurm = requeued.backend.details["slurm"]
    assert slurm["restarts"] == 1 and slurm["options"]["requeue"] is True
    assert [(e["rank"], e["path"]) for e in slurm["restored"]] == [(0, "checkpoints/requeued/last.pt")]
    assert not [w for w in requeued.warnings if w.code in ("resume_not_exact", "shared_writes")], (
        requeued.warnings
    )
    assert requeued.results.status == "succeeded" and requeued.resumed_from is None  # one run, one job
    assert _output_hash(requeued, "outputs/model.pt") == _output_hash(straight, "outputs/model.pt")
    r = project.repro("show", run_id)
    assert "1 restart" in r.out and "restart(s)" not in r.out
    assert "restored checkpoints/requeued/last.pt" in r.out


@pytest.mark.serial  # a requeue: alone, as above
def test_a_requeued_two_node_ddp_job_restores_every_ranks_rng_and_ends_with_the_uninterrupted_weights(
    project: Project, nodes: list[str]
) -> None:
    """DDP (gloo) with a `DistributedSampler`, per-rank dropout and augmentation, one rank on each node;
    rank 0 alone saves the checkpoint and both ranks load it. Requeued after the first checkpoint, every
    rank restores its own RNG streams recorded at that save: the weights of an uninterrupted 2-rank run."""
    if len(nodes) < 2:
        pytest.skip("the cluster has fewer than two nodes")
    project.script("ddp_resumable.py", "train.py")
    project.points(n=64)
    project.write(".gitignore", "outputs/\ncheckpoints/\n")
    project.commit("ddp")
    train = ["python", "train.py", "--epochs", "2", "--save", "outputs/model.pt"]
    r = project.repro("run", "--backend", "local", "--nproc-per-node", "2", "--seed", "7", "--data", "data",
                      "--", *train, "--resume", "checkpoints/straight.pt")  # fmt: skip
    assert r.code == 0, r.err
    straight = _record(project)

    proc = _slurm_run(project, "--requeue", "--nodes", "2", "--seed", "7", "--", *train,
                      "--resume", "checkpoints/requeued.pt", "--epoch-sleep", "3")  # fmt: skip
    run_id, job = _job_of_running_run(project)
    _wait_for((project.root / "checkpoints/requeued.pt").is_file, 120, "the first checkpoint")
    subprocess.run(["scontrol", "requeue", job], check=True)
    _wait_for(lambda: _job_state(job) == "PENDING", 30, "the requeued job to be pending")
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    requeued = _record(project, run_id)
    slurm = requeued.backend.details["slurm"]
    assert slurm["restarts"] == 1 and requeued.env.world_size == 2
    assert sorted((e["rank"], e["path"]) for e in slurm["restored"]) == [
        (0, "checkpoints/requeued.pt"), (1, "checkpoints/requeued.pt")
    ]  # fmt: skip
    assert not [w for w in requeued.warnings if w.code in ("resume_not_exact", "shared_writes")], (
        requeued.warnings
    )
    assert requeued.results.status == "succeeded"
    assert _output_hash(requeued, "outputs/model.pt") == _output_hash(straight, "outputs/model.pt")


def test_a_two_node_ddp_run_puts_one_rank_on_each_node_and_replays_identical_on_one_machine(
    project: Project, nodes: list[str]
) -> None:
    if len(nodes) < 2:
        pytest.skip("the cluster has fewer than two nodes")
    _train_project(project)
    r = project.repro("run", "--backend", "slurm", "--nodes", "2", "--data", "data", "--",
                      "python", "train.py", "--save", "outputs/model.pt", "--epochs", "2")  # fmt: skip
    assert r.code == 0, r.err
    record = _record(project)
    slurm = record.backend.details["slurm"]
    assert record.command.nodes == 2 and record.env.world_size == 2
    assert slurm["rank_nodes"] == {"0": slurm["nodes"][0], "1": slurm["nodes"][1]}
    assert len(slurm["node_hardware"]) == 2
    assert record.seeds.per_rank["1"]["torch"] == record.seeds.master + 1
    store = Store(project.root)
    rank1 = (store.resolve(record.id).read_blob(record.results.logs["rank1.stdout"]) or b"").decode()
    assert "rank 1 epoch 1 loss" in rank1 and "rank 0" not in rank1

    r = project.repro("replay", "latest", "--backend", "local", "--json")
    assert r.code == 0, r.out + r.err
    verdict = json.loads(r.out)
    assert verdict["status"] == "identical", verdict
    replay = _record(project)
    assert replay.command.nodes == 1 and replay.command.nproc_per_node == 2


def test_a_rank_failing_on_one_node_exits_4_naming_the_node_and_the_rank(
    project: Project, nodes: list[str]
) -> None:
    if len(nodes) < 2:
        pytest.skip("the cluster has fewer than two nodes")
    project.script("slurm_crash.py", "train.py")
    project.write("data/shards/shard0.csv", "1,2,0\n")
    project.write("data/shards/shard1.csv", "\n")
    project.commit("crash")
    r = project.repro(
        "run", "--backend", "slurm", "--nodes", "2", "--data", "data", "--", "python", "train.py"
    )
    assert r.code == 4, r.err
    second = _record(project).backend.details["slurm"]["nodes"][1]
    assert f"rank 1 on node {second} failed" in r.err
    assert "data shard data/shards/shard1.csv is empty" in r.err
    record = _record(project)
    assert record.results.status == "failed"
    assert record.backend.details["failed"] == {"node": second, "node_rank": 1, "exit_code": 1, "rank": 1}


def test_ctrl_c_cancels_the_job_and_the_run_is_recorded_as_interrupted(
    project: Project, nodes: list[str]
) -> None:
    _train_project(project)
    proc = _slurm_run(project, "--", "python", "train.py", "--epochs", "100", "--epoch-sleep", "1")
    run_id, job = _job_of_running_run(project)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert f"cancelling job {job}" in err
    record = _record(project, run_id)
    assert record.results.status == "interrupted"
    assert record.backend.details["slurm"]["state"] == "CANCELLED"
    assert _job_state(job) == "CANCELLED"


def test_a_detached_run_shows_as_pending_or_running_and_a_later_ls_seals_it(
    project: Project, nodes: list[str]
) -> None:
    _train_project(project)
    r = project.repro("run", "--backend", "slurm", "--detach", "--json", "--data", "data", "--",
                      "python", "train.py", "--save", "outputs/model.pt", "--epochs", "2")  # fmt: skip
    assert r.code == 0, r.err
    submitted = json.loads(r.out)
    assert submitted["detached"] is True and submitted["job_id"].isdigit()
    rows = json.loads(project.repro("ls", "--json", "--reverse").out)["runs"]
    assert [(row["id"], row["status"], row["backend"]) for row in rows] in (
        [(submitted["id"], "pending", "slurm")],
        [(submitted["id"], "running", "slurm")],
    )

    def sealed() -> bool:
        return bool(json.loads(project.repro("ls", "--json").out)["runs"][0]["status"] == "succeeded")

    _wait_for(sealed, 180, "a `repro ls` to seal the ended job")
    record = _record(project, submitted["id"])
    assert record.backend.details["slurm"]["job_id"] == submitted["job_id"]
    assert record.results.exit_code == 0 and _output_hash(record, "outputs/model.pt")
    shown = project.repro("show", submitted["id"]).out
    assert f"job {submitted['job_id']} completed" in shown and "node " in shown

    # The run exported as a standalone batch script, submitted by hand: the same weights.
    r = project.repro("export", submitted["id"], "--as", "slurm", "-o", "job.sbatch")
    assert r.code == 0, r.err
    (project.root / "outputs" / "model.pt").unlink()
    shutil.rmtree(project.root / "checkpoints")  # a fresh training, not a continuation
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # `python` with torch on PATH
    subprocess.run(["sbatch", "--wait", "--output=export.out", "job.sbatch"], cwd=project.root, check=True,
                   env={**os.environ, "PATH": path}, capture_output=True, timeout=300)  # fmt: skip
    assert "rank 0 epoch 1 loss" in (project.root / "export.out").read_text()
    assert hash_file(project.root / "outputs" / "model.pt") == _output_hash(record, "outputs/model.pt")


@pytest.mark.docker
def test_nodes_can_run_the_command_in_the_runs_image(project: Project, nodes: list[str]) -> None:
    from repro.backends.docker.engine import engine_available

    if not engine_available():
        pytest.skip("no Docker engine answers (start one with `make docker-up`, or set DOCKER_HOST)")
    _train_project(project)
    project.lock_torch()
    project.commit("lock")
    r = project.repro("run", "--backend", "slurm", "--node-env", "docker", "--data", "data", "--",
                      "python", "train.py", "--save", "outputs/model.pt", "--epochs", "2")  # fmt: skip
    assert r.code == 0, r.err
    record = _record(project)
    assert record.backend.details["slurm"]["options"]["environment"] == "docker"
    assert record.deps.image is not None and (record.deps.image.id or "").startswith("sha256:")
    # measured inside the image: the lock's packages, none of this test environment's (pytest)
    assert any(p.startswith("torch==") for p in record.deps.freeze)
    assert not any(p.startswith("pytest==") for p in record.deps.freeze)
    assert "rank 0 epoch 1 loss" in r.out and _output_hash(record, "outputs/model.pt")
