"""`repro diff A B --prove` with windowed experiments, on real training: a resumable script in the shape
of public code (argparse, a checkpoint loaded when present, dropout and a shuffled DataLoader, tqdm,
the model saved in the working directory). Run A trains uninterrupted; run B is the same run killed
and resumed with its RNG states deliberately not restored; run C is killed and resumed exactly. Every
experiment replays a window of A from the checkpoint A and B share: the RNG state is proved the cause,
and C shows no differing factor.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from repro.collect.checkpoints import SPOILED
from tests.conftest import Project

pytestmark = pytest.mark.slow

TRAIN = """\
import argparse
import random
from pathlib import Path

import torch
from tqdm import tqdm

p = argparse.ArgumentParser(description="a small classifier with dropout, resumable")
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--lr", type=float, default=0.05)
p.add_argument("--checkpoint", default="checkpoints/last.pt")
args = p.parse_args()

r = random.Random(0)
x = torch.tensor([[r.gauss(0, 1) for _ in range(8)] for _ in range(48)])
y = (x.sum(dim=1, keepdim=True) > 0).float()
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8, shuffle=True)
model = torch.nn.Sequential(
    torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 1)
)
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
start = 0
ckpt = Path(args.checkpoint)
if ckpt.exists():  # resume where the last run stopped
    state = torch.load(ckpt)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    start = state["epoch"] + 1
ckpt.parent.mkdir(parents=True, exist_ok=True)
for epoch in range(start, args.epochs):
    for xb, yb in tqdm(loader, disable=True):
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(xb), yb)
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": epoch}, ckpt)
torch.save(model.state_dict(), "model.pt")
"""
RUN = ("run", "--backend", "local", "--trace", "--seed", "1", "--", "python", "train.py")
STEPS_PER_EPOCH = 6  # 48 samples, batches of 8


def _latest(project: Project) -> str:
    return str(json.loads(project.repro("show", "latest", "--json").out)["id"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, dict[str, str]]:
    """Run A uninterrupted; one run killed after optimizer step 8 (its last checkpoint: step 6), resumed
    twice from that checkpoint: B with its RNG states not restored, C exactly."""
    project = Project.init(tmp_path_factory.mktemp("prove-resume") / "proj")
    project.write(".gitignore", "checkpoints/\nmodel.pt\n")
    project.write("train.py", TRAIN)
    project.commit("train")
    assert project.repro(*RUN).code == 0
    ids = {"a": _latest(project)}
    shutil.rmtree(project.root / "checkpoints")
    killed = project.repro(*RUN, env={"REPRO_INTERRUPT_AT_STEP": "8"})
    assert killed.code != 0, killed.err
    ids["killed"] = _latest(project)
    kept = (project.root / "checkpoints/last.pt").read_bytes()
    spoiled = {"REPRO_RESUME_CONTROL": "rng"}  # what `repro check --control` resumes with
    resumed = project.repro("resume", ids["killed"], "--backend", "local", env=spoiled)
    assert resumed.code == 0, resumed.err
    ids["b"] = _latest(project)
    (project.root / "checkpoints/last.pt").write_bytes(kept)  # the same checkpoint for the exact resume
    assert project.repro("resume", ids["killed"], "--backend", "local").code == 0
    ids["c"] = _latest(project)
    return project, ids


def _prove(project: Project, a: str, b: str) -> dict[str, Any]:
    r = project.repro("diff", a, b, "--prove", "--json")
    assert r.code == 0, r.err
    proof: dict[str, Any] = json.loads(r.out)["proof"]
    return proof


def test_a_resume_without_its_rng_states_is_proved_the_cause_by_windowed_experiments(
    runs: tuple[Project, dict[str, str]],
) -> None:
    project, ids = runs
    proof = _prove(project, ids["a"], ids["b"])
    assert {f["factor"]["id"]: f["effect"] for f in proof["findings"]} == {"rng": "changes_result"}
    assert proof["explained"] and proof["proved"] == ["rng"]
    window = proof["window"]
    assert window["windowed"] and window["from_step"] == STEPS_PER_EPOCH == window["diverged_at"]
    assert window["steps"] == 1 + 2  # to the first divergence, plus the least margin (10% of 18 steps)
    (experiment,) = proof["experiments"]
    assert experiment["vs_a"] == "diverged" and experiment["vs_b"] == "identical"
    record = json.loads(project.repro("show", experiment["run"], "--json").out)
    taken = record["verification"]
    assert record["parent"] == ids["a"] and taken["taken_from"] == ids["b"]
    assert [f["factor"] for f in taken["factors"]] == ["rng"] and taken["window"] == window
    assert any(SPOILED in w["message"] for w in record["warnings"])  # its restore was spoiled, as B's
    listed = {row["id"] for row in json.loads(project.repro("ls", "--json").out)["runs"]}
    assert experiment["run"] not in listed


def test_an_exact_resume_shows_no_differing_factor(runs: tuple[Project, dict[str, str]]) -> None:
    project, ids = runs
    proof = _prove(project, ids["a"], ids["c"])
    assert proof["findings"] == [] and proof["experiments"] == [] and proof["proved"] == []
    assert any("agree at all 18 optimizer steps" in n for n in proof["notes"]), proof["notes"]
