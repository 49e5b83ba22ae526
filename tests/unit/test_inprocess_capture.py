"""`repro.capture()` and the `%%repro` notebook magic: a run recorded from inside the process."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

import repro
from repro.errors import UsageError
from repro.rerun.request import ReplayRequest
from repro.rerun.verify import verify_run
from repro.store.runs import Store
from tests.conftest import Project


def _train(steps: int = 20) -> float:
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 2)
    y = x.sum(dim=1, keepdim=True)
    for step in range(steps):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        repro.log_metric("loss", loss.item(), step)
    Path("outputs").mkdir(exist_ok=True)
    torch.save(model.state_dict(), "outputs/model.pt")
    return loss.item()


def test_a_block_is_recorded_as_an_in_process_run(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch  # imported before the block: capture seeds it late, and says so

    monkeypatch.chdir(project.root)
    project.points()
    project.commit("data")
    with repro.capture(data=["data"], outputs=["outputs"], seed=11) as run:
        repro.log_params(lr=0.1, hidden=4)
        first = random.random()
        loss = _train()
    record = Store(project.root).resolve(run.id).record
    assert record.captured_in_process and record.backend.name == "in-process"
    assert record.results.status == "succeeded" and record.seeds.master == 11
    assert {"random", "torch"} <= set(record.determinism.knobs["seeded_in_process"])
    assert record.code.kind == "git" and record.code.commit
    assert [i.path for i in record.data.inputs] == ["data"] and record.data.inputs[0].digest
    assert [o.path for o in record.results.outputs] == ["outputs/model.pt"]
    assert record.results.params == {"hidden": 4, "lr": 0.1}
    assert record.results.final_metrics["loss"] == pytest.approx(loss)
    assert any(w.code == "in_process" and "captured in-process" in w.message for w in record.warnings)
    assert "REPRO_RUN_ID" not in __import__("os").environ  # the process is left as it was
    assert any(p.startswith("torch==") for p in record.deps.freeze)
    from repro.ui.records import show_text

    assert "in-process (repro.capture)" in show_text(record)

    # The same seed in the same process state gives the same stream: the seed was applied.
    with repro.capture(outputs=["outputs"], seed=11):
        assert random.random() == first
        torch.randn(1)
    with pytest.raises(UsageError, match="captured in-process"):
        verify_run(ReplayRequest(ref=run.id), Store(project.root), None, lambda e: None)  # type: ignore[arg-type]


def test_a_failing_block_is_recorded_as_failed(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project.root)
    with pytest.raises(ZeroDivisionError), repro.capture() as run:
        1 / 0  # noqa: B018
    record = Store(project.root).resolve(run.id).record
    assert record.results.status == "failed" and record.results.exit_code == 1


def test_the_notebook_magic_records_the_session_cells(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip(
        "IPython", reason="ipython is not installed (pip install 'repro-capsule[integrations]')"
    )
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.chdir(project.root)
    shell: Any = InteractiveShell.instance()  # untyped
    try:
        assert shell.run_cell("%load_ext repro", store_history=True).success
        assert shell.run_cell("import json\nsteps = 3", store_history=True).success
        cell = (
            "%%repro --outputs outputs --seed 5\n"
            "import os, random, repro\n"
            "os.makedirs('outputs', exist_ok=True)\n"
            "values = [random.random() for _ in range(steps)]\n"
            "for i, v in enumerate(values):\n"
            "    repro.log_metric('v', v, i)\n"
            "with open('outputs/values.json', 'w') as f:\n"
            "    json.dump(values, f)\n"
        )
        assert shell.run_cell(cell, store_history=True).success
    finally:
        InteractiveShell.clear_instance()
    store = Store(project.root)
    record = store.resolve("latest").record
    assert record.captured_in_process and record.seeds.master == 5
    cells = store.blob_path(record.code.cells or "").read_text()
    assert "# In[1]:\n%load_ext repro" in cells and "# In[2]:\nimport json\nsteps = 3" in cells
    assert "json.dump(values" in cells and "%%repro" not in cells.split("(recorded by %%repro):")[1]
    assert [o.path for o in record.results.outputs] == ["outputs/values.json"]
    values = json.loads((project.root / "outputs" / "values.json").read_text())
    random.seed(5)
    assert values == [random.random() for _ in range(3)]
    assert record.results.final_metrics["v"] == values[-1]
