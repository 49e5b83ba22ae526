"""Strict mode with N intra-op threads: recorded, applied, and pinned on replay whatever this host says."""

from __future__ import annotations

import json

from tests.builders import show_json
from tests.conftest import Project


def test_threads_are_recorded_and_the_replay_keeps_them(project: Project) -> None:
    project.script("conv_threads.py", "train.py")
    project.commit("train")
    r = project.repro("run", "--backend", "local", "--threads", "2", "--", "python", "train.py")
    assert r.code == 0, r.err
    assert "torch threads 2" in r.out  # the script's own stdout, streamed by repro to its stdout
    det = show_json(project, "latest")["determinism"]
    assert det["mode"] == "strict" and det["threads"] == 2
    assert det["env"]["OMP_NUM_THREADS"] == det["env"]["REPRO_THREADS"] == "2"
    assert det["knobs"]["threads"] == 2

    # This host asks for 1 thread; the replay still runs with the 2 the record names.
    r = project.repro("replay", "latest", "--json", env={"REPRO_THREADS": "1", "OMP_NUM_THREADS": "1"})
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
    rows = json.loads(project.repro("ls", "--json", "--reverse").out)["runs"]
    replayed = show_json(project, rows[-1]["id"])
    assert rows[-1]["kind"] == "replay"
    assert replayed["determinism"]["threads"] == 2 and replayed["determinism"]["knobs"]["threads"] == 2
