"""Paths on the command line are relative to where the user stands, as in any shell command.

A project with its training code in a subfolder (`examples/mnist/` style): from there,
`--data ../../data`, `--outputs`, `-o`, `--markdown` and `--junit` name places inside the
project relative to that subfolder; repro.yaml's paths stay relative to the project root.
Real runs of a small script in a real git repository, local backend.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Project

TRAIN = """\
import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="../../data/points.csv")
parser.add_argument("--out", default="runs")
args = parser.parse_args()
rows = [line.split(",") for line in open(args.data).read().split()]
weight = sum(float(r[0]) * float(r[2]) for r in rows) / len(rows)
os.makedirs(args.out, exist_ok=True)
with open(os.path.join(args.out, "model.txt"), "w") as f:
    f.write(f"{weight:.6f}\\n")
print(f"trained on {len(rows)} rows")
"""


def _project(project: Project) -> Path:
    project.points()
    project.write("examples/toy/train.py", TRAIN)
    project.write(".gitignore", "outputs/\nruns/\n*.tar\n*.md\n*.xml\n")
    project.commit("toy example")
    return project.root / "examples" / "toy"


def test_data_outputs_and_files_given_from_a_subfolder(project: Project) -> None:
    here = _project(project)
    r = project.repro(
        "run", "--backend", "local", "--data", "../../data", "--outputs", "runs", "--json",
        "--", "python", "train.py", cwd=here,
    )  # fmt: skip
    assert r.code == 0, r.err
    record = json.loads(project.repro("show", "latest", "--json", cwd=here).out)
    assert [i["path"] for i in record["data"]["inputs"]] == ["data"]
    assert record["results"]["output_roots"] == ["examples/toy/runs"]
    assert [o["path"] for o in record["results"]["outputs"]] == ["examples/toy/runs/model.txt"]
    assert record["command"]["cwd"] == "examples/toy"

    assert project.repro("export", "latest", "-o", "../../run.tar", cwd=here).code == 0
    assert (project.root / "run.tar").is_file()
    replayed = project.repro("replay", "latest", "--markdown", "../../verdict.md", cwd=here)
    assert replayed.code == 0, replayed.out + replayed.err
    assert "Reproduced: identical" in (project.root / "verdict.md").read_text()
    checked = project.repro(
        "check", "--backend", "local", "--data", "../../data", "--outputs", "runs",
        "--junit", "../report.xml", "--", "python", "train.py", cwd=here,
    )  # fmt: skip
    assert checked.code == 0, checked.out + checked.err
    assert (project.root / "examples" / "report.xml").is_file()


def test_a_path_outside_the_project_is_named_as_given_from_where_it_points(project: Project) -> None:
    here = _project(project)
    outside = project.root.parent / "elsewhere"
    outside.mkdir()
    for option, words in (("--data", "outside the project"), ("--outputs", "not inside the project")):
        args = ["run", "--backend", "local", option, "../../../elsewhere", "--", "python", "train.py"]
        r = project.repro(*args, cwd=here)
        assert r.code == 2, r.out + r.err
        assert words in r.err and str(outside) in r.err and "Traceback" not in r.err, r.err
    runs = project.root / ".repro" / "runs"
    assert not runs.is_dir() or not any(runs.iterdir())  # nothing was recorded


def test_repro_yaml_paths_stay_relative_to_the_project_root(project: Project) -> None:
    here = _project(project)
    project.write("repro.yaml", "backend: local\ndata: [data]\n")
    r = project.repro("run", "--", "python", "train.py", cwd=here)
    assert r.code == 0, r.err
    record = json.loads(project.repro("show", "latest", "--json", cwd=here).out)
    assert [i["path"] for i in record["data"]["inputs"]] == ["data"]
