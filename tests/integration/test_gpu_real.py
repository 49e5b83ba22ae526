"""gpu mode on a real CUDA GPU: one small training run twice in separate processes, identical bytes."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Project

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

TRAIN = """\
import argparse
import os

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--save", default="outputs/model.pt")
args = parser.parse_args()

torch.manual_seed(1337)
device = torch.device("cuda")
x = torch.randn(64, 8, device=device)
y = (x.sum(dim=1, keepdim=True) > 0).float()
model = nn.Sequential(nn.Conv1d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(32, 1)).to(device)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for epoch in range(args.epochs):
    for i in range(0, 64, 16):
        opt.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(model(x[i : i + 16, None, :]), y[i : i + 16])
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.6f}")
os.makedirs("outputs", exist_ok=True)
torch.save(model.state_dict(), args.save)
"""


def test_gpu_mode_gives_identical_bytes_twice(project: Project) -> None:
    project.write("train.py", TRAIN)
    project.commit("gpu training")

    r = project.repro("check", "--json", "--backend", "local", "--gpus", "all", "--", "python", "train.py")

    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["status"] == "identical"
    assert {run["mode"] for run in data["runs"]} == {"gpu"}


# The training scripts scripts/gpu-check runs (run + replay, report), here as `repro check` twice.
GPU_SCRIPTS = ["gpu_cnn.py", "gpu_gpt.py", "gpu_scatter.py"]


@pytest.mark.parametrize("name", GPU_SCRIPTS)
def test_gpu_mode_models_give_identical_bytes_twice(project: Project, name: str) -> None:
    project.script(name, "train.py")
    project.commit(f"{name} on the GPU")

    r = project.repro("check", "--json", "--backend", "local", "--gpus", "1", "--", "python", "train.py")

    assert r.code == 0, r.err
    assert json.loads(r.out)["status"] == "identical"
