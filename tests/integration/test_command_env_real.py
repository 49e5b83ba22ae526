"""`TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 repro run …`: a variable the script needs is recorded, passed
to the command on every backend, and set again by the replay, which comes back identical.

The script has the shape of pytorch/examples' time_sequence_prediction on torch >= 2.6: it saves
a checkpoint that pickles its argparse Namespace, and loads it back with a bare ``torch.load``,
which refuses such a file unless the variable is set.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Project

TRAIN = """\
import argparse
from pathlib import Path

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--lr", type=float, default=0.05)
args = parser.parse_args()

torch.manual_seed(0)
x = torch.linspace(-1, 1, 64).unsqueeze(1)
y = torch.sin(3 * x)
model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
Path("checkpoints").mkdir(exist_ok=True)
for step in range(args.steps):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.6f}")
    torch.save({"model": model.state_dict(), "args": args, "step": step}, f"checkpoints/step{step}.pt")
state = torch.load(f"checkpoints/step{args.steps - 1}.pt")  # needs TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1
model.load_state_dict(state["model"])
print("restored", state["args"])
torch.save(model.state_dict(), "model.pt")
"""

FORCE = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}


@pytest.fixture
def loads_a_pickle(project: Project) -> Project:
    project.write("train.py", TRAIN)
    project.write(".gitignore", "outputs/\ncheckpoints/\nmodel.pt\n")
    project.commit("train")
    return project


def _replayed(project: Project, *args: str, cwd: Path | None = None) -> dict[str, object]:
    r = project.repro("replay", *args, "--json", cwd=cwd)  # the replaying shell does not set it
    assert r.code == 0, r.out + r.err
    assert "recorded environment variables set again: TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1" in r.err
    verdict: dict[str, object] = json.loads(r.out)
    assert verdict["status"] == "identical", verdict
    return verdict


def test_a_variable_set_for_the_command_is_set_again_by_the_replay(
    loads_a_pickle: Project, tmp_path: Path
) -> None:
    project = loads_a_pickle
    without = project.repro("run", "--backend", "local", "train.py")
    assert without.code == 4 and "Weights only load failed" in without.err  # the script needs it
    r = project.repro("run", "--backend", "local", "train.py", env=FORCE)
    assert r.code == 0, r.err
    _replayed(project, "latest")

    tar = tmp_path / "run.tar"
    assert project.repro("export", "latest", "-o", str(tar)).code == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _replayed(project, str(tar), "--backend", "local", cwd=elsewhere)  # from elsewhere: the same safe set


@pytest.mark.docker
def test_the_container_gets_it_too_and_its_replay_comes_back_identical(loads_a_pickle: Project) -> None:
    project = loads_a_pickle
    project.lock_torch()
    project.commit("lock")
    r = project.repro("run", "--backend", "docker", "train.py", env=FORCE)
    assert r.code == 0, r.err
    _replayed(project, "latest")
