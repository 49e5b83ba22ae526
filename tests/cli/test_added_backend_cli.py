"""A backend registered from outside repro (`tests/added_backend.py`) is a backend like the others:
`--backend` and `backend:` accept it, a run executes on it and is recorded with its name, `repro show`
prints its own lines, a replay runs on it, and its own flag is listed in `repro run --help` and reaches
its options; no file of repro names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from repro.backends import registry
from tests.added_backend import NAME
from tests.conftest import REPO, CliResult, Project

TRAIN = """import argparse, os, random

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()
weights = [random.random() for _ in range(4)]
for epoch in range(args.epochs):
    weights = [w * 0.9 + random.random() * 0.1 for w in weights]
    print(f"epoch {epoch} loss {sum(weights):.6f}")
os.makedirs("outputs", exist_ok=True)
with open("outputs/model.txt", "w") as f:
    f.write(" ".join(f"{w:.12f}" for w in weights))
"""


def _repro(project: Project, *args: str) -> CliResult:
    """`repro` with the added backend registered."""
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.added_backend", *args],
        cwd=project.root, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def test_a_run_on_an_added_backend_is_recorded_shown_and_replayed(project: Project) -> None:
    project.write("train.py", TRAIN)
    project.commit("train")
    r = _repro(project, "run", "--backend", NAME, "--", "python", "train.py", "--epochs", "3")
    assert r.code == 0, r.err
    assert "epoch 2 loss" in r.out and f"backend {NAME}" in r.out + r.err

    record = json.loads(_repro(project, "show", "latest", "--json").out)
    assert record["backend"]["name"] == NAME and record["backend"]["details"][NAME]["exit_code"] == 0
    shown = _repro(project, "show", "latest")
    assert shown.code == 0 and f"{NAME}" in shown.out and "exited 0, run by repro pid" in shown.out

    replayed = _repro(project, "replay", "latest", "--json")
    assert replayed.code == 0, replayed.err
    assert json.loads(replayed.out)["status"] == "identical"


def test_an_added_backends_flag_is_listed_under_its_heading_and_reaches_its_options(project: Project) -> None:
    help_text = _repro(project, "run", "--help").out
    assert "Subprocess options (with --backend subprocess):\n  --nice N " in help_text
    assert help_text.index("Slurm options") < help_text.index("Subprocess options")
    assert "--nice" not in project.repro("run", "--help").out  # plain repro does not know it

    project.write("nice.py", "import os\nprint('niceness', os.nice(0))\n")
    project.commit("nice")
    r = _repro(project, "run", "--backend", NAME, "--nice", "5", "--", "python", "nice.py")
    assert r.code == 0, r.err
    assert f"niceness {min(19, os.nice(0) + 5)}" in r.out  # the command ran 5 nicer than repro
    record = json.loads(_repro(project, "show", "latest", "--json").out)
    assert record["backend"]["details"][NAME]["nice"] == 5

    r = _repro(project, "run", "--backend", "local", "--nice", "5", "--", "python", "nice.py")
    assert r.code == 2 and f"--nice only applies to --backend {NAME}" in r.err
    assert "niceness" not in r.out


def test_the_settings_accept_an_added_backend_and_plain_repro_does_not_know_it(project: Project) -> None:
    project.write("train.py", TRAIN)
    project.write("repro.yaml", f"backend: {NAME}\n")
    project.commit("train")
    r = _repro(project, "run", "--", "python", "train.py", "--epochs", "1")
    assert r.code == 0, r.err
    assert json.loads(_repro(project, "show", "latest", "--json").out)["backend"]["name"] == NAME

    plain = project.repro("run", "--backend", NAME, "--", "python", "train.py")
    assert plain.code == 2 and f"'{NAME}' is not one of" in plain.err
    assert "'auto', 'local', 'docker', 'podman', 'slurm'" in plain.err


def test_registering_a_taken_name_is_refused() -> None:
    from tests.added_backend import ENTRY

    with pytest.raises(ValueError, match="registered already"):
        registry.register(registry.Entry("local", "x", ENTRY.build, on_host=True))
    from repro.backends.flags import Flag, FlagSection

    taken = FlagSection("Enroot options", (Flag("--nodes", "Nodes."), Flag("--rootless/--no-requeue", "x.")))
    with pytest.raises(ValueError, match="flags another backend has: --nodes, --no-requeue$"):
        registry.register(registry.Entry("enroot", "x", ENTRY.build, on_host=False, flags=taken))
    assert NAME not in registry.names() and "enroot" not in registry.names()  # nothing registered here
