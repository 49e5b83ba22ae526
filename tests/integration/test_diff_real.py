"""The Dave/Leslie story for real: two training runs under `repro run`, then `repro diff`.

Leslie trains with `--lr 0.1 --batch-size 32`; new samples land in the data directory;
Dave trains with other hyper-parameters. `repro diff` must name the added files and
both hyper-parameters in its first lines, with the data change first.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TRAIN = """\
import argparse
from pathlib import Path

import torch

import repro

p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default=0.01)
p.add_argument("--batch-size", type=int, default=16)
args = p.parse_args()
rows = []
for f in sorted(Path("data").glob("*.csv")):
    rows += [[float(v) for v in line.split(",")] for line in f.read_text().splitlines() if line]
t = torch.tensor(rows)
x, y = t[:, :2], t[:, 2:]
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
for step in range(4):
    perm = torch.randperm(len(x))
    for i in range(0, len(x), args.batch_size):
        idx = perm[i : i + args.batch_size]
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[idx]), y[idx]).backward()
        opt.step()
    repro.log_metric("loss", torch.nn.functional.mse_loss(model(x), y).item(), step=step)
Path("outputs").mkdir(exist_ok=True)
torch.save(model.state_dict(), "outputs/model.pt")
"""


def _write_samples(data: Path, first: int, count: int, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(first, first + count):
        lines = []
        for _ in range(16):
            a, b = rng.random(), rng.random()
            lines.append(f"{a:.4f},{b:.4f},{2 * a - b + seed:.4f}")
        (data / f"part{i}.csv").write_text("\n".join(lines) + "\n")


def _git(project: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=project, check=True, capture_output=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "leslie-project"
    (root / "data").mkdir(parents=True)
    (root / "train.py").write_text(TRAIN)
    (root / ".gitignore").write_text("outputs/\n.repro/\n")
    _write_samples(root / "data", 0, 4, seed=0)
    _git(root, "init", "-q")
    _git(root, "-c", "user.email=l@example.com", "-c", "user.name=Leslie", "add", "-A")
    _git(root, "-c", "user.email=l@example.com", "-c", "user.name=Leslie", "commit", "-q", "-m", "init")
    return root


def repro(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1"}
    return subprocess.run(
        [str(bindir / "repro"), *args], cwd=project, env=env, capture_output=True, text=True, timeout=600
    )


def train(project: Path, lr: str, batch_size: str) -> None:
    done = repro(
        project,
        "run",
        "--backend",
        "local",
        "--seed",
        "1",
        "--data",
        "data",
        "--outputs",
        "outputs",
        "--",
        "python",
        "train.py",
        "--lr",
        lr,
        "--batch-size",
        batch_size,
    )
    assert done.returncode == 0, done.stderr


def test_dave_and_leslie(project: Path) -> None:
    train(project, "0.1", "32")  # Leslie
    train(project, "0.1", "32")  # Leslie again, nothing changed
    same = repro(project, "diff", "latest~1", "latest", "--exit-code")
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.startswith("No recorded differences between ")

    _write_samples(project / "data", 4, 3, seed=7)  # new samples arrive
    train(project, "0.05", "8")  # Dave

    done = repro(project, "diff", "latest~1", "latest", "--exit-code")
    assert done.returncode == 1, done.stderr
    first_three = done.stdout.splitlines()[:3]
    assert " sections differ; likely causes:" in first_three[0]
    assert first_three[1].startswith("  1. data changed: 3 files added")
    assert "part4.csv, part5.csv, part6.csv" in first_three[1]
    assert first_three[2] == "  2. hyper-parameters changed: batch_size 32 → 8, lr 0.1 → 0.05"

    result = json.loads(repro(project, "diff", "latest~1", "latest", "--json").stdout)
    assert result["likely_causes"][0]["section"] == "data"
    assert result["results_differ"] is True
    sections = {s["name"]: s for s in result["sections"]}
    added = [c["key"] for c in sections["data"]["changes"] if c["kind"] == "added"]
    assert added == ["data/part4.csv", "data/part5.csv", "data/part6.csv"]
    params = {c["key"]: (c["old"], c["new"]) for c in sections["command"]["changes"] if c["scope"] == "param"}
    assert params == {"batch_size": (32, 8), "lr": (0.1, 0.05)}
    assert sections["metrics"]["divergence"]["metric"] == "loss"
    assert not sections["code"]["differs"] and not sections["seeds"]["differs"]

    plot = project / "curves.png"
    assert repro(project, "diff", "latest~2", "latest", "--plot", str(plot)).returncode == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
