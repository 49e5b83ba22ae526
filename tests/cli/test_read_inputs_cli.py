"""A run's inputs are what it read: a nanoGPT-shaped project whose `prepare.py` writes untracked
`data/shakespeare_char/train.bin` and `meta.pkl`, and whose `train.py` reads them, run without
`--data`. The files read are recorded as inputs (kept in the store, carried by `export --with-data`),
a log redirected into the project is listed, never code nor dirt, and a replay that lacks an input
says so before anything runs. Real runs of a torch-free script, local backend, real git repository."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import Project

PREPARE = """\
import os
import pickle
import random
from array import array

here = os.path.dirname(os.path.abspath(__file__))
text = "".join(random.Random(0).choice("abcdefgh \\n") for _ in range(4000))
chars = sorted(set(text))
stoi = {ch: i for i, ch in enumerate(chars)}
ids = array("H", [stoi[c] for c in text])
with open(os.path.join(here, "train.bin"), "wb") as f:
    ids.tofile(f)
with open(os.path.join(here, "meta.pkl"), "wb") as f:
    pickle.dump({"vocab_size": len(chars), "stoi": stoi}, f)
"""

TRAIN = """\
import argparse
import os
import pickle
import random
from array import array

parser = argparse.ArgumentParser()
parser.add_argument("--dataset", default="shakespeare_char")
parser.add_argument("--max_iters", type=int, default=20)
parser.add_argument("--out_dir", default="out")
args = parser.parse_args()

data_dir = os.path.join("data", args.dataset)
with open(os.path.join(data_dir, "meta.pkl"), "rb") as f:
    meta = pickle.load(f)
data = array("H")
with open(os.path.join(data_dir, "train.bin"), "rb") as f:
    data.frombytes(f.read())
counts = [1.0] * meta["vocab_size"]
for it in range(args.max_iters):
    i = random.randrange(len(data) - 9)
    for t in data[i : i + 8]:
        counts[t] += 1.0
    if it % 5 == 0:
        print(f"iter {it}: loss {sum(counts) / len(counts):.4f}", flush=True)
os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "ckpt.pt"), "w") as f:
    f.write(repr(counts))
"""


def _prepared(project: Project) -> None:
    project.write("data/shakespeare_char/prepare.py", PREPARE)
    project.write("train.py", TRAIN)
    project.write(".gitignore", "outputs/\nout/\n")
    project.commit("nanogpt")
    subprocess.run([sys.executable, "data/shakespeare_char/prepare.py"], cwd=project.root, check=True)
    project.write("train.out", "an earlier run's log, redirected into the project\n")


def _run(project: Project) -> dict[str, Any]:
    r = project.repro(
        "run", "--json", "--backend", "local", "--seed", "1", "--outputs", "out", "--", "python", "train.py"
    )
    assert r.code == 0, r.out + r.err
    record: dict[str, Any] = json.loads(project.repro("show", "latest", "--json").out)
    return record


def test_files_the_run_read_are_inputs_kept_and_carried(project: Project, tmp_path: Path) -> None:
    _prepared(project)
    record = _run(project)
    read = {i["path"]: i for i in record["data"]["inputs"]}
    assert sorted(read) == ["data/shakespeare_char/meta.pkl", "data/shakespeare_char/train.bin"]
    assert all(i["read"] for i in read.values())  # recorded because the run read them, not declared
    code = record["code"]
    untracked_code = [u["path"] for u in code["untracked"]]
    assert "train.out" not in untracked_code and "data/shakespeare_char/train.bin" not in untracked_code
    assert "train.out" in [u["path"] for u in code["listed"]] and code["dirty"] is False
    shown = project.repro("show", "latest").out
    assert "data/shakespeare_char/train.bin (1 file, read, not declared): here" in shown
    assert "dirty" not in shown.split("\ncode", 1)[1].split("\n", 1)[0]

    tar = tmp_path / "run.tar"
    r = project.repro("export", "latest", "-o", str(tar), "--with-data")
    assert r.code == 0, r.err
    empty = tmp_path / "fresh"
    empty.mkdir()
    r = project.repro("replay", str(tar), "--backend", "local", "--json", cwd=empty)
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
    assert "uses the copy carried in the capsule" in r.err


def test_a_replay_lacking_an_input_names_it_before_running(project: Project, tmp_path: Path) -> None:
    _prepared(project)
    project.write("repro.yaml", "store:\n  max_input_bytes: 16\n")
    r = project.repro(
        "run", "--backend", "local", "--seed", "1", "--outputs", "out", "--", "python", "train.py"
    )
    assert r.code == 0, r.err
    assert "store.max_input_bytes" in r.err and "data/shakespeare_char/train.bin" in r.err
    shutil.move(project.root / "data/shakespeare_char/train.bin", tmp_path / "train.bin")
    runs = len(json.loads(project.repro("ls", "--json").out)["runs"])
    r = project.repro("replay", "latest", "--backend", "local")
    assert r.code == 5, r.out + r.err
    said = r.err.split("error:", 1)[1]
    assert "the run read data/shakespeare_char/train.bin" in said and "no copy is kept" in said, r.err
    assert "--with-data" in said and "--data " in said  # how to supply it, and how to declare it
    assert "FileNotFoundError" not in r.out + r.err and "replaying" not in r.err  # nothing ran
    assert len(json.loads(project.repro("ls", "--json").out)["runs"]) == runs
