"""The runtime's file reports: reads of declared data are not reported (the data manifest names
them); every other read under the project, and writes, are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = """
import os, sys
from repro.runtime import files
files.install(sys.argv[1])
root = sys.argv[1]
for rel in ("data/train/a.bin", "data/train/b.bin", "labels.csv", "config.json", "data/../notes.txt"):
    open(os.path.join(root, rel), "rb").read()
os.chdir(root)
open("data/train/c.bin", "rb").read()  # relative: still declared data
open("labels.csv", "rb").read()
with open("out.txt", "w") as f:
    f.write("x")
"""


def test_reads_of_declared_data_are_not_reported_and_other_reads_are(tmp_path: Path) -> None:
    root, runtime = tmp_path / "proj", tmp_path / "runtime"
    (root / "data" / "train").mkdir(parents=True)
    runtime.mkdir()
    for rel in ("data/train/a.bin", "data/train/b.bin", "data/train/c.bin", "labels.csv", "config.json"):
        (root / rel).write_bytes(b"x")
    (root / "notes.txt").write_text("n")
    env = {
        **os.environ,
        "REPRO_RUNTIME_DIR": str(runtime),
        "REPRO_DATA": os.pathsep.join(["data/train", "labels.csv"]),
    }
    subprocess.run([sys.executable, "-c", CHILD, str(root)], env=env, check=True)
    events = [json.loads(line) for p in runtime.glob("proc.*.jsonl") for line in p.read_text().splitlines()]
    reads = sorted(e["p"] for e in events if e["kind"] == "r")
    writes = sorted(e["p"] for e in events if e["kind"] == "w")
    assert reads == ["config.json", "notes.txt"]  # `data/../notes.txt` left the data: reported
    assert writes == ["out.txt"]


CHILD_IN_ROOT = """
import os, sys
from repro.runtime import files
files.install(".")
for rel in ("data/train/a.bin", "./data/train/b.bin", "labels.csv", "data/train/../../notes.txt"):
    open(rel, "rb").read()
open(os.path.abspath("data/train/c.bin")).read()
os.chdir("sub")  # the same relative names are other files now
open("data/train/a.bin", "rb").read()
open("labels.csv", "rb").read()
open("../data/train/b.bin", "rb").read()  # declared data, by another name
"""


def test_relative_names_of_declared_data_stop_matching_when_the_script_changes_directory(
    tmp_path: Path,
) -> None:
    """The fast path tests a read's name as the script wrote it: relative to where the run started, until
    the script changes directory; a name that climbs out of the data (`..`) is never taken as data."""
    root, runtime = tmp_path / "proj", tmp_path / "runtime"
    runtime.mkdir()
    for rel in ("data/train/a.bin", "data/train/b.bin", "data/train/c.bin", "labels.csv", "notes.txt",
                "sub/data/train/a.bin", "sub/labels.csv"):  # fmt: skip
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x")
    env = {
        **os.environ,
        "REPRO_RUNTIME_DIR": str(runtime),
        "REPRO_DATA": os.pathsep.join(["data/train", "labels.csv"]),
    }
    subprocess.run([sys.executable, "-c", CHILD_IN_ROOT], cwd=root, env=env, check=True)
    events = [json.loads(line) for p in runtime.glob("proc.*.jsonl") for line in p.read_text().splitlines()]
    reads = sorted(e["p"] for e in events if e["kind"] == "r")
    assert reads == ["notes.txt", "sub/data/train/a.bin", "sub/labels.csv"]
