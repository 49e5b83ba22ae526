"""Strict mode at 2 intra-op threads gives the same bytes run after run: a small training (convolution,
layer norm, MLP, Adam, DataLoader workers) run twice in fresh processes under strict's environment and
the runtime, its final weights compared byte for byte."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from repro.facts.determinism import plan, resolve_isa
from repro.facts.env import cpu_info

SCRIPT = textwrap.dedent(
    """
    import hashlib, json
    from repro.runtime import boot
    boot.boot()
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(256, 3, 12, 12, generator=g), torch.randint(0, 10, (256,), generator=g))
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Flatten(), nn.LayerNorm(1600),
                          nn.Linear(1600, 256), nn.GELU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        for x, y in DataLoader(data, batch_size=64, shuffle=True, num_workers=2):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    digest = hashlib.sha256(b"".join(t.numpy().tobytes() for t in model.state_dict().values()))
    print(json.dumps({"threads": torch.get_num_threads(), "weights": digest.hexdigest()}))
    """
)


def _train(tmp_path: Path, name: str, threads: int) -> dict[str, object]:
    det = plan("strict", threads, resolve_isa("auto", cpu_info()[1]))
    runtime = tmp_path / name
    runtime.mkdir()
    env = {
        **os.environ,
        **det.env,
        "REPRO_RUN_ID": name,
        "REPRO_RUNTIME_DIR": str(runtime),
        "REPRO_SEED": "7",
    }
    env.pop("RANK", None)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    result["knobs"] = json.loads((runtime / "knobs.json").read_text())
    return result


@pytest.mark.slow
def test_two_strict_runs_at_two_threads_give_the_same_bytes(tmp_path: Path) -> None:
    first, second = _train(tmp_path, "a", 2), _train(tmp_path, "b", 2)
    assert first["threads"] == second["threads"] == 2
    knobs = first["knobs"]
    assert isinstance(knobs, dict) and knobs["threads"] == 2 and knobs["deterministic_algorithms"] is True
    assert first["weights"] == second["weights"]
    assert len(str(first["weights"])) == len(hashlib.sha256().hexdigest())
