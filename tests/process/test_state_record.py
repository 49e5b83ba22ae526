"""The per-step state record `check --interrupt` compares (runtime/staterecord.py), written by fresh
processes: two processes in the same state write the same row, and a one-ulp change of one element of
one tensor — a float32 optimizer state, a float64 parameter read by the other path — is named by its
state path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from repro.compare.resumetrace import first_cause, parse

SCRIPT = textwrap.dedent(
    """
    import json, os, random, sys
    import numpy as np
    import torch
    from repro.runtime import staterecord
    random.seed(1); np.random.seed(1); torch.manual_seed(1); random.gauss(0, 1)
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Dropout(0.2), torch.nn.Linear(5, 2))
    extra = torch.nn.Parameter(torch.randn(7, dtype=torch.float64))
    optimizer = torch.optim.Adam([*model.parameters(), extra], lr=0.01)
    rows = []
    for step in range(3):
        optimizer.zero_grad()
        (model(torch.randn(4, 3)).sum() + extra.sum().float()).backward()
        row = {"step": step, **staterecord.tensors_row(optimizer), "rng": staterecord.rng_fingerprints()}
        optimizer.step()
        row["grads"] = staterecord.grads(optimizer)
        rows.append(row)
        with torch.no_grad():
            where = os.environ.get("NUDGE")
            if step == 1 and where == "exp_avg":
                state = optimizer.state[model[0].bias]["exp_avg"]
                state[2] = float(np.nextafter(np.float32(state[2].item()), np.float32(np.inf)))
            if step == 1 and where == "float64":
                extra[4] = float(np.nextafter(extra[4].item(), np.inf))
    print("\\n".join(json.dumps(r) for r in rows))
    """
)


def _rows(tmp_path: Path, nudge: str) -> list[dict[str, Any]]:
    env = {**os.environ, "NUDGE": nudge, "PYTHONHASHSEED": str(len(nudge) + 1)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    return parse(done.stdout)


def test_the_same_state_gives_the_same_row_and_one_ulp_is_named_by_its_path(tmp_path: Path) -> None:
    reference = _rows(tmp_path, "")
    assert sorted(reference[0]["rng"]) == ["numpy", "numpy_generators", "python", "torch"]
    state = reference[2]["state"]
    assert isinstance(state, dict) and "optimizer.state[1].exp_avg" in state and "params[4]" in state
    assert (
        first_cause(reference, _rows(tmp_path, "none"), rank=0) is None
    )  # another process, another hash seed
    nudged = first_cause(reference, _rows(tmp_path, "exp_avg"), rank=0)
    assert nudged is not None and (nudged.step, nudged.cause) == (2, "optimizer")
    assert nudged.path == "optimizer.state[1].exp_avg"
    moved = first_cause(reference, _rows(tmp_path, "float64"), rank=0)
    assert moved is not None and (moved.step, moved.cause, moved.path) == (2, "model", "params[4]")
    assert json.dumps(moved.named()).startswith('"rank 0: params[4] differs')
