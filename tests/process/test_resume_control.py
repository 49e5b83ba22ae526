"""The negative control's spoiled resume, in a real process: no RNG restore takes effect — neither the
runtime's at a checkpoint load nor the script's own (`torch.set_rng_state`, `random.setstate`,
`numpy.random.set_state`, as the Hugging Face Trainer's `rng_state.pth` does) — while an ordinary
resumed process restores them all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

SCRIPT = textwrap.dedent(
    """
    import json, random
    import numpy as np
    import torch
    from repro.runtime import boot
    boot.boot()
    saved = (torch.get_rng_state(), random.getstate(), np.random.get_state())
    before = (torch.rand(3).tolist(), random.random(), np.random.rand())
    torch.set_rng_state(saved[0]); random.setstate(saved[1]); np.random.set_state(saved[2])
    torch.random.set_rng_state(saved[0])
    after = (torch.rand(3).tolist(), random.random(), np.random.rand())
    print(json.dumps([a == b for a, b in zip(before, after)]))
    """
)


def _restored(tmp_path: Path, control: str | None) -> list[bool]:
    env = {**os.environ, "REPRO_RUN_ID": "t", "REPRO_RUNTIME_DIR": str(tmp_path), "REPRO_RESUMED_FROM": "r"}
    env.pop("RANK", None)
    env.pop("REPRO_RESUME_CONTROL", None)
    if control is not None:
        env["REPRO_RESUME_CONTROL"] = control
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    restored: list[bool] = json.loads(done.stdout.strip().splitlines()[-1])
    return restored


def test_a_spoiled_resume_ignores_every_rng_restore_and_an_ordinary_one_does_not(tmp_path: Path) -> None:
    assert _restored(tmp_path / "ordinary", None) == [True, True, True]
    assert _restored(tmp_path / "control", "rng") == [False, False, False]


TRACED = textwrap.dedent(
    """
    import torch
    from repro.runtime import boot
    boot.boot()
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
    data = TensorDataset(torch.arange(16.0).unsqueeze(1))
    sampler = DistributedSampler(data, num_replicas=1, rank=0, seed=3)
    sampler.set_epoch(2)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    for (x,) in DataLoader(data, batch_size=4, sampler=sampler):
        model(x).sum().backward()
        optimizer.step()
        scheduler.step()
    """
)


def _trace(tmp_path: Path, control: str | None) -> list[dict[str, Any]]:
    tmp_path.mkdir()
    env = {**os.environ, "REPRO_RUN_ID": "t", "REPRO_RUNTIME_DIR": str(tmp_path), "REPRO_RESUME_TRACE": "1"}
    for name in ("RANK", "REPRO_RESUME_CONTROL", "REPRO_RESUMED_FROM"):
        env.pop(name, None)
    if control is not None:
        env.update(REPRO_RESUME_CONTROL=control, REPRO_RESUMED_FROM="r")
    command = [sys.executable, "-c", TRACED]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (trace,) = tmp_path.glob("rtrace*.jsonl")
    return [json.loads(line) for line in trace.read_text().splitlines()]


def test_the_trace_holds_the_scheduler_count_the_sampler_epoch_and_the_batch_and_a_control_resets_the_epoch(
    tmp_path: Path,
) -> None:
    rows = _trace(tmp_path / "ordinary", None)
    assert [row["scheduler"] for row in rows] == [[0], [1], [2], [3]]
    assert {tuple(row["sampler"]) for row in rows} == {(2,)}
    assert len({row["dataloader"] for row in rows}) == 4  # each step's batch: another fingerprint
    spoiled = _trace(tmp_path / "control", "sampler")
    assert {tuple(row["sampler"]) for row in spoiled} == {(0,)}
    assert [row["dataloader"] for row in spoiled] != [row["dataloader"] for row in rows]  # epoch 0's order
