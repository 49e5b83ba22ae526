"""A command is recorded as typed: `torchrun …` stays `torchrun …` in `command.argv` (shown by `show`
and `ls`), beside the launch repro normalised it to, which is what a replay runs. A real torchrun
launch of a torch-free script shaped like DDP code (reads LOCAL_RANK, saves from rank 0), local backend."""

from __future__ import annotations

import json

from tests.conftest import Project

TRAIN = """\
import argparse
import os
import random

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()
rank = int(os.environ.get("LOCAL_RANK", "-1"))
w = [random.random() for _ in range(4)]
for epoch in range(args.epochs):
    w = [x * 0.5 + random.random() for x in w]
    print(f"rank {rank} epoch {epoch}", flush=True)
if rank <= 0:
    with open("model.pt", "w") as f:
        f.write(repr(w))
"""


def test_torchrun_is_recorded_as_typed_and_replays_as_launched(project: Project) -> None:
    project.write("train.py", TRAIN)
    project.commit("ddp")
    typed = ["torchrun", "--nproc-per-node", "1", "--standalone", "train.py", "--epochs", "2"]
    r = project.repro("run", "--backend", "local", "--seed", "4", "--", *typed)
    assert r.code == 0, r.err
    record = json.loads(project.repro("show", "latest", "--json").out)
    assert record["command"]["argv"] == typed
    assert record["command"]["launch"] == ["python", "train.py", "--epochs", "2"]
    assert record["command"]["torchrun"] is True and record["command"]["params"] == {"epochs": 2}
    shown = project.repro("show", "latest").out
    assert "torchrun --nproc-per-node 1 --standalone train.py --epochs 2" in shown
    assert "torchrun --nproc-per-node 1" in project.repro("ls").out
    r = project.repro("replay", "latest", "--json")
    assert r.code == 0 and json.loads(r.out)["status"] == "identical", r.out + r.err
    replay = json.loads(project.repro("show", "latest", "--json").out)
    assert replay["command"]["argv"] == typed and replay["command"]["launch"] == record["command"]["launch"]


def test_a_plain_command_records_no_separate_launch(project: Project) -> None:
    project.write("train.py", TRAIN)
    project.commit("train")
    r = project.repro("run", "--backend", "local", "--", "python", "train.py", "--epochs", "1")
    assert r.code == 0, r.err
    command = json.loads(project.repro("show", "latest", "--json").out)["command"]
    assert command["argv"] == ["python", "train.py", "--epochs", "1"] and command["launch"] == []
