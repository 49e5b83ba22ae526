"""`repro replay --threads N`: a replay at another thread count, recorded in its record and said in its
verdict; without the flag the recorded count stays and a `REPRO_THREADS` of the shell is said to be
ignored. A real torch-free run (it prints the thread count the libraries are pinned to), local backend."""

from __future__ import annotations

import json

import pytest

from repro.facts.cpus import usable_cpus
from repro.units import plural
from tests.conftest import Project

TRAIN = """\
import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()
for epoch in range(args.epochs):
    print(f"epoch {epoch}: omp threads {os.environ.get('OMP_NUM_THREADS')}", flush=True)
"""


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Project:
    project = Project.init(tmp_path_factory.mktemp("threads") / "proj")
    project.write(".gitignore", "outputs/\n")
    project.write("train.py", TRAIN)
    project.write("repro.yaml", "threads: 1\n")  # the replay at 2 threads differs from it by N alone
    project.commit("train")
    r = project.repro("run", "--backend", "local", "--seed", "1", "--", "python", "train.py")
    assert r.code == 0, r.err
    return project


def test_replay_at_two_threads_is_recorded_and_said(ran: Project) -> None:
    original = json.loads(ran.repro("show", "latest", "--json").out)
    assert original["determinism"]["threads"] == 1
    r = ran.repro("replay", original["id"], "--threads", "2", "--json")
    verdict = json.loads(r.out)
    assert r.code == 5 and verdict["status"] == "diverged", r.err  # the pinned count is in its stdout
    assert any(n.startswith("thread count differs: the replay ran at 2 intra-op threads, the original at 1")
               for n in verdict["notes"]), verdict["notes"]  # fmt: skip
    replay = json.loads(ran.repro("show", "latest", "--json").out)
    assert replay["kind"] == "replay" and replay["determinism"]["threads"] == 2
    assert replay["determinism"]["env"]["OMP_NUM_THREADS"] == "2"
    assert "thread count differs" in ran.repro("show", "latest").out


def test_without_the_flag_the_recorded_count_stays_and_repro_threads_is_said_ignored(ran: Project) -> None:
    first = json.loads(ran.repro("ls", "--json").out)["runs"][-1]["id"]
    r = ran.repro("replay", first, "--json", env={"REPRO_THREADS": "3"})
    assert r.code == 0 and json.loads(r.out)["status"] == "identical", r.out + r.err
    said = [line for line in r.err.splitlines() if "REPRO_THREADS" in line]
    assert len(said) == 1 and "REPRO_THREADS=3 is ignored" in said[0] and "1 thread" in said[0]
    assert json.loads(ran.repro("show", "latest", "--json").out)["determinism"]["threads"] == 1


def test_threads_out_of_range_is_a_usage_error(ran: Project) -> None:
    r = ran.repro("replay", "latest", "--threads", "0")
    assert r.code == 2 and "--threads" in r.err


def test_a_replay_on_fewer_cpus_keeps_the_recorded_count_and_says_it_will_be_slower(ran: Project) -> None:
    more = usable_cpus() + 1  # a run recorded on a machine that let it use one CPU more than this one
    r = ran.repro(
        "run", "--backend", "local", "--seed", "1", "--threads", str(more), "--", "python", "train.py"
    )
    assert r.code == 0, r.err
    r = ran.repro("replay", "latest", "--json")
    assert r.code == 0 and json.loads(r.out)["status"] == "identical", r.out + r.err
    said = [line for line in r.err.splitlines() if "will be slower" in line]
    assert len(said) == 1 and f"it keeps {more} (the same bits)" in said[0], r.err
    assert f"use {plural(usable_cpus(), 'CPU')}" in said[0]
    assert json.loads(ran.repro("show", "latest", "--json").out)["determinism"]["threads"] == more


def test_a_run_without_threads_runs_at_the_cpus_it_may_use(ran: Project) -> None:
    first = json.loads(ran.repro("ls", "--json").out)["runs"][-1]["id"]
    recorded = json.loads(ran.repro("show", first, "--json").out)["determinism"]
    assert recorded["threads"] == 1  # repro.yaml's
    ran.write("repro.yaml", "")
    r = ran.repro("run", "--backend", "local", "--seed", "1", "--", "python", "train.py")
    ran.write("repro.yaml", "threads: 1\n")
    assert r.code == 0, r.err
    det = json.loads(ran.repro("show", "latest", "--json").out)["determinism"]
    assert det["threads"] == usable_cpus() and det["env"]["OMP_NUM_THREADS"] == str(usable_cpus())
