"""`repro diff` compares saved state dicts tensor by tensor, as a replay does.

Two real trainings that fine-tune only the classifier's bias (BitFit) at other learning rates save
`model.pt` state dicts that differ in that one tensor: the diff names it with its difference, and
counts the unchanged ones, in text and JSON.
"""

from __future__ import annotations

import json

import pytest

from repro.store.runs import Store
from tests.conftest import Project

pytestmark = pytest.mark.slow


def test_diff_of_two_state_dicts_names_the_one_tensor_that_differs(project: Project) -> None:
    project.script("shuffled_train.py", "train.py")
    project.points()
    project.commit("train")
    ids = []
    for lr in ("0.05", "0.2"):
        r = project.repro("run", "--backend", "local", "--seed", "11", "--data", "data", "--",
                          "python", "train.py", "--seed", "3", "--finetune", "bias", "--lr", lr)  # fmt: skip
        assert r.code == 0, r.err
        ids.append(Store(project.root).resolve("latest").record.id)

    r = project.repro("diff", *ids, "--json")
    assert r.code == 0, r.err
    (outputs,) = [s for s in json.loads(r.out)["sections"] if s["name"] == "outputs"]
    (model,) = [c for c in outputs["changes"] if c["key"] == "model.pt"]
    tensors = model["tensors"]
    assert [t["name"] for t in tensors["differing"]] == ["2.bias"]
    assert tensors["unchanged"] == 3  # 0.weight, 0.bias, 2.weight: frozen
    (bias,) = tensors["differing"]
    assert bias["kind"] == "value" and bias["max_abs"] > 0 and bias["max_rel"] > 0
    assert model["detail"].startswith("1 tensor differs: 2.bias (max abs ")

    text = project.repro("diff", *ids).out
    assert "1 tensor differs: 2.bias" in text and "3 unchanged" in text, text
    assert any(line.split()[:3] == ["2.bias", "max", "abs"] for line in text.splitlines()), text
