"""Multi-process runs: torchrun inside the backend, per-rank seeds and logs, replay, failures.

Real two-rank gloo training on the CPU, run and replayed in separate processes and
compared byte for byte. Kept small (2 ranks, 96 points, no DataLoader workers): the
CI machine has 2 cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.store.record import Record
from repro.store.runs import Store
from tests.conftest import Project, _docker_missing

pytestmark = pytest.mark.slow


def _record(project: Project, ref: str = "latest") -> tuple[Record, Store]:
    store = Store(project.root)
    return store.resolve(ref).record, store


def _log(store: Store, record: Record, name: str) -> str:
    return (store.resolve(record.id).read_blob(record.results.logs[name]) or b"").decode()


def _ddp_project(project: Project) -> None:
    project.script("ddp_train.py", "train_ddp.py")
    project.points()
    project.commit("ddp")


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status  # a zombie has exited; only its parent has not reaped it yet


def test_unseeded_ddp_training_replays_identical_with_per_rank_seeds_and_logs(project: Project) -> None:
    _ddp_project(project)
    r = project.repro("run", "--backend", "local", "--nproc-per-node", "2", "--data", "data",
                      "--", "python", "train_ddp.py")  # fmt: skip
    assert r.code == 0, r.err
    # live on repro's stdout, both ranks in one stream
    assert "[default0]:rank 0 epoch 1 loss" in r.out and "[default1]:rank 1 epoch 1 loss" in r.out

    record, store = _record(project)
    assert record.command.nproc_per_node == 2
    assert record.env.world_size == 2
    assert record.env.rank_devices == {"0": "cpu", "1": "cpu"}
    assert record.determinism.knobs["process_group_backend"] == "gloo"
    master = record.seeds.master
    assert record.seeds.per_rank["0"]["torch"] == master and record.seeds.per_rank["1"]["torch"] == master + 1
    rank0, rank1 = _log(store, record, "rank0.stdout"), _log(store, record, "rank1.stdout")
    assert "rank 0 epoch 1 loss" in rank0 and "rank 1" not in rank0
    assert "rank 1 epoch 1 loss" in rank1 and "rank 0" not in rank1
    assert "rank 1 epoch 0 done" in _log(store, record, "rank1.stderr")
    # each rank's data order: its DistributedSampler shard, batch by batch
    orders = [[json.loads(x) for x in _log(store, record, f"dataorder.rank{r}").splitlines()] for r in (0, 1)]
    firsts = [next(row["indices"] for row in rows if row.get("step") == 0) for rows in orders]
    assert firsts[0] and firsts[1] and not set(firsts[0]) & set(firsts[1]), firsts

    r = project.repro("replay", "latest", "--json")
    assert r.code == 0, r.out + r.err
    verdict = json.loads(r.out)
    assert verdict["status"] == "identical", verdict
    replayed, _ = _record(project)
    assert replayed.env.world_size == 2 and replayed.seeds.per_rank == record.seeds.per_rank

    r = project.repro("show", record.id)
    assert "2 processes (torchrun), process group gloo; rank 0 → cpu, rank 1 → cpu" in r.out


def test_another_world_size_is_refused_unless_allowed_and_then_never_identical(project: Project) -> None:
    _ddp_project(project)
    # No training steps: the saved model is rank 0's initial weights whatever the world size.
    r = project.repro("run", "--backend", "local", "--nproc-per-node", "2", "--data", "data",
                      "--", "python", "train_ddp.py", "--epochs", "0")  # fmt: skip
    assert r.code == 0, r.err

    r = project.repro("replay", "latest", "--nproc-per-node", "1")
    assert r.code == 2
    assert "the run used 2 process(es)" in r.err and "--allow-world-size-change" in r.err
    assert len(json.loads(project.repro("ls", "--json", "--reverse").out)["runs"]) == 1  # nothing ran

    r = project.repro("replay", "latest", "--nproc-per-node", "1", "--allow-world-size-change")
    assert r.code == 0, r.out + r.err
    replayed, _ = _record(project)
    verification = replayed.verification or {}
    assert verification["status"] == "within_tolerance"  # byte-identical outputs, but another world size
    summary = verification["summary"]
    assert summary.startswith("within tolerance: ") and "another world size" in summary, summary
    assert summary in r.out and "identical:" not in r.out  # printed as decided, never "identical"
    assert "world size changed: 2 → 1" in r.out + r.err


def test_a_crashing_rank_fails_the_run_with_its_number_and_stderr(project: Project) -> None:
    project.script("ddp_crash.py")
    project.commit("crash")
    r = project.repro("run", "--backend", "local", "--nproc-per-node", "2", "ddp_crash.py")
    assert r.code == 4, r.err
    assert "rank 1 of 2 failed first (exit code 1)" in r.err
    assert "[rank1]: RuntimeError: boom: rank 1 lost its data shard" in r.err
    assert "[rank1]: rank 1: the shard is empty" in r.err

    record, store = _record(project)
    assert record.results.status == "failed" and record.results.exit_code == 1  # torchrun's status
    assert record.results.stderr_tail[-1] == "[rank1]: RuntimeError: boom: rank 1 lost its data shard"
    assert "boom" in _log(store, record, "rank1.stderr")
    assert "rank 0 started" in _log(store, record, "rank0.stdout")
    assert "rank 1 of 2 failed first" in project.repro("show", record.id).out


def test_no_process_of_the_run_outlives_it(project: Project) -> None:
    project.script("ddp_orphans.py")
    project.commit("orphans")
    r = project.repro("run", "--backend", "local", "--nproc-per-node", "2", "ddp_orphans.py")
    assert r.code == 0, r.err
    pids = [int((project.root / "outputs" / f"sleeper{rank}.pid").read_text()) for rank in (0, 1)]
    assert not [pid for pid in pids if _alive(pid)]


# --------------------------------------------------------------------------- docker


@pytest.mark.docker
def test_ddp_in_a_container_replays_identical(project: Project) -> None:
    reason = _docker_missing()
    if reason:
        pytest.skip(reason)
    project.lock_torch()
    _ddp_project(project)
    r = project.repro("run", "--backend", "docker", "--nproc-per-node", "2", "--data", "data",
                      "--", "python", "train_ddp.py")  # fmt: skip
    assert r.code == 0, r.err
    record, store = _record(project)
    assert record.backend.name == "docker"
    assert record.env.world_size == 2 and record.determinism.knobs["process_group_backend"] == "gloo"
    assert "rank 1 epoch 1 loss" in _log(store, record, "rank1.stdout")

    r = project.repro("replay", "latest", "--json")
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
