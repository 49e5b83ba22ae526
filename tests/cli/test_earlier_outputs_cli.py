"""Files an earlier run left in the working tree (a model.pt not in .gitignore) are outputs, not code.

Real runs of torch-free scripts in a real git repository, local backend: the second run
lists the first run's model.pt (untracked, not source: never code) and names it as an
earlier run's output; `show`, `diff` and `resume` say so instead of "code changed".
"""

from __future__ import annotations

import json
import sqlite3

from tests.conftest import Project

TRAIN = """\
import argparse
import os
import random
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--save", default="model.pt")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--crash-at", type=int, default=-1)
args = parser.parse_args()

os.makedirs("checkpoints", exist_ok=True)
weights, start = [random.random() for _ in range(4)], 0
if os.path.exists("checkpoints/last.txt"):  # resume when a checkpoint is there
    epoch, text = open("checkpoints/last.txt").read().split(":", 1)
    weights, start = [float(w) for w in text.split(",")], int(epoch) + 1
    print(f"=> resuming from checkpoints/last.txt (epoch {epoch})", flush=True)
for epoch in range(start, args.epochs):
    weights = [w * 0.9 + random.random() * 0.1 for w in weights]
    with open("checkpoints/last.txt", "w") as f:
        f.write(f"{epoch}:" + ",".join(repr(w) for w in weights))
    if epoch == args.crash_at:
        sys.exit(3)
with open(args.save, "w") as f:
    f.write(repr(weights))
"""


def _run(project: Project, *args: str) -> tuple[int, str]:
    r = project.repro("run", "--json", "--backend", "local", "--seed", "3", "--", "python", "train.py", *args)
    return r.code, json.loads(r.out)["id"]


def test_an_earlier_runs_model_is_named_as_its_output_not_as_code(project: Project) -> None:
    project.write("train.py", TRAIN)
    project.commit("train")
    code, first = _run(project, "--epochs", "2")
    assert code == 0
    # A longer run on top: it resumes from the first run's checkpoint, then dies at epoch 3.
    code, second = _run(project, "--epochs", "5", "--crash-at", "3")
    assert code == 4
    shown = project.repro("show", second).out
    assert f"model.pt (written by {first}; not counted as code)" in shown
    assert f"checkpoints/last.txt (written by {first}; not counted as code" in shown
    assert "dirty" not in shown.split("\ncode", 1)[1].split("\n", 1)[0]

    diff = project.repro("diff", first, second)
    assert "code changed" not in diff.out
    assert "2. files earlier runs left in the working tree differ: checkpoints/last.txt (written" in diff.out
    assert (
        f"Code — 2 files earlier runs wrote\n  + checkpoints/last.txt  77 B (written by run {first})\n"
        f"  + model.pt              80 B (written by run {first})\n"
    ) in diff.out

    # The dead run's checkpoint changed since its snapshot: a run wrote it, not a code change.
    r = project.repro("resume", second)
    assert r.code == 0, r.err
    assert "=> resuming from checkpoints/last.txt (epoch 3)" in r.out  # the script's stdout is repro's


def test_an_edited_file_at_an_outputs_path_is_code(project: Project) -> None:
    project.write("train.py", TRAIN)
    project.commit("train")
    code, first = _run(project, "--save", "weights.py")
    assert code == 0
    project.write("weights.py", "W = [1.0]\n")  # the user's own edit: no run wrote these bytes
    code, second = _run(project)
    shown = project.repro("show", second).out
    assert "weights.py (written by" not in shown and "dirty (1 untracked)" in shown
    assert f"checkpoints/last.txt (written by {first};" in shown  # the first run's, unchanged


def test_an_index_from_before_outputs_were_indexed_learns_them(project: Project) -> None:
    project.write("train.py", TRAIN)
    project.commit("train")
    code, first = _run(project)
    index = project.root / ".repro" / "index.sqlite"
    with sqlite3.connect(index) as db:  # as an older repro left it
        db.execute("DROP TABLE outputs")
        db.execute("PRAGMA user_version = 0")
    (project.root / "checkpoints" / "last.txt").unlink()
    code, second = _run(project)  # sealing it rebuilds the outputs table; the next capture sees it
    code, third = _run(project)
    assert f"model.pt (written by {second};" in project.repro("show", third).out
