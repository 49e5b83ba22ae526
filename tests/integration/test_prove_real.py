"""`repro diff A B --prove` on real training: a script in the shape of public code (argparse, a model
module, a data file the run reads, checkpoints/, the model saved in the working directory, tqdm), run
A against runs B that differ in (a) the data, the seed and a flag the script ignores, (b) the model code and
the learning rate (each a cause), (b') a code change and a flag that only matter together, (c) the
thread count on a model whose reduction splits by `torch.get_num_threads()`. Every experiment's record
is read back: it took the factors the proof says, from run B, and is hidden from `repro ls`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow

TRAIN = """\
import argparse
from pathlib import Path

import torch
from tqdm import tqdm

import repro
from model import Net

p = argparse.ArgumentParser(description="small regressor")
p.add_argument("--lr", type=float, default=0.05)
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--scale", type=float, default=1.0)
p.add_argument("--run-name", default="")  # a label, as trackers take one: training never reads it
args = p.parse_args()

rows = [[float(v) for v in line.split(",")] for line in Path("data/train.csv").read_text().splitlines()]
t = torch.tensor(rows)
data = torch.utils.data.TensorDataset(t[:, :-1], t[:, -1:])
loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True)
model = Net(scale=args.scale)
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
Path("checkpoints").mkdir(exist_ok=True)
for epoch in range(args.epochs):
    for i, (x, y) in enumerate(tqdm(loader, disable=True)):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if i % 4 == 0:
            print(f"epoch {epoch} batch {i} loss {loss.item():.4f}")
    repro.log_metric("loss", loss.item(), step=epoch)
    torch.save(model.state_dict(), f"checkpoints/epoch{epoch}.pt")
torch.save(model.state_dict(), "model.pt")
"""

MODEL = """\
import torch


class Net(torch.nn.Module):
    def __init__(self, scale=1.0):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 1)
        self.scale = scale

    def forward(self, x):
        h = torch.tanh(self.fc1(x))
        # a reduction split into one part per intra-op thread, summed in order: its rounding follows the
        # thread count on every CPU
        parts = [c.sum(dim=1, keepdim=True) for c in h.chunk(torch.get_num_threads(), dim=1)]
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        return self.fc2(h) + 0.1 * total
"""
V1 = MODEL  # scale accepted, unused
V2 = MODEL.replace("torch.tanh", "torch.sigmoid")  # another activation
# scale used: the same bits as V1 at scale 1 (a product by 1.0 is exact)
V3 = MODEL.replace("return self.fc2(h) + 0.1 * total", "return (self.fc2(h) + 0.1 * total) * self.scale")


def _data(seed: int) -> str:
    r = random.Random(seed)
    return "".join(",".join(f"{r.gauss(0, 1):.5f}" for _ in range(17)) + "\n" for _ in range(64))


def _run(project: Project, *args: str) -> str:
    r = project.repro("run", "--backend", "local", *args)
    assert r.code == 0, r.out + r.err
    return str(json.loads(project.repro("show", "latest", "--json").out)["id"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, dict[str, str]]:
    """Run A and the runs B of each case, in one project."""
    project = Project.init(tmp_path_factory.mktemp("prove") / "proj")
    project.write(".gitignore", "data/\ncheckpoints/\nmodel.pt\n")
    project.write("train.py", TRAIN)
    project.write("model.py", V1)
    project.write("repro.yaml", "threads: 1\n")  # the runs at 2 threads differ from these by N alone
    project.write("data/train.csv", _data(1))  # read by the run, kept in the store
    project.commit("train")
    ids = {"a": _run(project, "--seed", "1", "--ops", "--", "python", "train.py", "--lr", "0.05")}
    ids["threads"] = _run(
        project, "--seed", "1", "--threads", "2", "--", "python", "train.py", "--lr", "0.05"
    )
    project.write("data/train.csv", _data(2))
    ids["data"] = _run(project, "--seed", "2", "--", "python", "train.py", "--lr", "0.05", "--run-name", "b")
    project.write("data/train.csv", _data(1))
    project.write("model.py", V2)
    project.commit("sigmoid")
    ids["code_lr"] = _run(project, "--seed", "1", "--", "python", "train.py", "--lr", "0.1")
    project.write("model.py", V3)
    project.commit("scale the output")
    ids["together"] = _run(project, "--seed", "1", "--", "python", "train.py", "--lr", "0.05", "--scale", "2")
    return project, ids


def _prove(project: Project, a: str, b: str, *more: str) -> dict[str, Any]:
    r = project.repro("diff", a, b, "--prove", "--json", *more)
    assert r.code == 0, r.err
    proof: dict[str, Any] = json.loads(r.out)["proof"]
    return proof


def _effects(proof: dict[str, Any]) -> dict[str, str]:
    return {f["factor"]["id"]: f["effect"] for f in proof["findings"]}


def _check_records(
    project: Project, proof: dict[str, Any], a: str, b: str
) -> dict[tuple[str, ...], dict[str, Any]]:
    """Each experiment's record (by the factors it took): re-executed from A, took the factors the
    proof says from B."""
    records = {}
    for e in proof["experiments"]:
        record = json.loads(project.repro("show", e["run"], "--json").out)
        taken = record["verification"]
        assert record["parent"] == a and taken["of"] == a and taken["taken_from"] == b
        assert [f["factor"] for f in taken["factors"]] == e["factors"]
        records[tuple(e["factors"])] = record
    listed = {row["id"] for row in json.loads(project.repro("ls", "--json").out)["runs"]}
    assert not listed & {e["run"] for e in proof["experiments"]}  # helper runs: not listed
    return records


def test_data_and_seed_are_proved_and_an_ignored_flag_has_no_effect(
    runs: tuple[Project, dict[str, str]],
) -> None:
    project, ids = runs
    proof = _prove(project, ids["a"], ids["data"])
    assert _effects(proof) == {
        "param:run_name": "no_effect", "data:data/train.csv": "changes_result", "seed": "changes_result",
    }  # fmt: skip
    assert proof["explained"] and proof["proved"] == ["data:data/train.csv", "seed"]
    assert len(proof["experiments"]) <= proof["budget"] == 6
    records = _check_records(project, proof, ids["a"], ids["data"])
    assert records[("seed",)]["seeds"]["master"] == 2 and records[("param:run_name",)]["seeds"]["master"] == 1
    assert records[("param:run_name",)]["command"]["argv"][-2:] == ["--run-name", "b"]
    assert json.loads(project.repro("show", "latest", "--json").out)["id"] == ids["together"]  # not a helper


def test_code_and_learning_rate_each_change_the_result(runs: tuple[Project, dict[str, str]]) -> None:
    project, ids = runs
    proof = _prove(project, ids["a"], ids["code_lr"])
    effects = _effects(proof)
    assert effects["code:model.py"] == effects["param:lr"] == "changes_result"
    assert proof["explained"] and sorted(proof["proved"]) == ["code:model.py", "param:lr"]
    records = _check_records(project, proof, ids["a"], ids["code_lr"])
    assert records[("param:lr",)]["command"]["argv"][-2:] == ["--lr", "0.1"]
    code = {f["path"]: f["hash"] for f in records[("code:model.py",)]["code"]["files"]}
    theirs = json.loads(project.repro("show", ids["code_lr"], "--json").out)["code"]["files"]
    assert code["model.py"] == next(f["hash"] for f in theirs if f["path"] == "model.py")


def test_a_code_change_and_a_flag_that_matter_only_together(runs: tuple[Project, dict[str, str]]) -> None:
    project, ids = runs
    proof = _prove(project, ids["a"], ids["together"])
    finding = {f["factor"]["id"]: f for f in proof["findings"]}
    assert finding["code:model.py"]["effect"] == "only_together"
    assert finding["code:model.py"]["together_with"] == ["param:scale"]
    assert finding["param:scale"]["effect"] == "only_together"
    assert proof["explained"] and sorted(proof["proved"]) == ["code:model.py", "param:scale"]
    _check_records(project, proof, ids["a"], ids["together"])


def test_the_thread_count_is_proved(runs: tuple[Project, dict[str, str]], tmp_path: Path) -> None:
    project, ids = runs
    md = tmp_path / "proof.md"
    proof = _prove(project, ids["a"], ids["threads"], "--markdown", str(md))
    assert _effects(proof) == {"threads": "changes_result"} and proof["proved"] == ["threads"]
    (finding,) = proof["findings"]  # run A recorded its op stream: the first op that differs is named
    assert finding["op"] and finding["op"].endswith("(optimizer step 0)"), finding
    assert proof["window"]["windowed"] is False and "not traced" in proof["window"]["why_not"]
    records = _check_records(project, proof, ids["a"], ids["threads"])
    assert records[("threads",)]["determinism"]["threads"] == 2
    assert "| `threads` | changes the result" in md.read_text()


def test_check_against_a_golden_run_explains_its_failure(runs: tuple[Project, dict[str, str]]) -> None:
    """Today's tree has another activation: `check --against` fails, and --prove names the file."""
    project, ids = runs
    model = project.root / "model.py"
    kept = model.read_text()
    model.write_text(V2)
    try:
        r = project.repro("check", "--against", ids["a"], "--backend", "local", "--prove", "--json")
    finally:
        model.write_text(kept)
    assert r.code == 5, r.err
    proof = json.loads(r.out)["diff"]["proof"]
    assert proof["proved"] == ["code:model.py"] and _effects(proof) == {"code:model.py": "changes_result"}
