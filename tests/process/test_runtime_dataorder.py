"""The runtime's data-order record, in a real process: DataLoaders numbered by creation order, a row per
batch with a running digest, epochs with persistent workers, worker base seeds, the index budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import torch
    from repro.runtime import batchorder, boot
    boot.boot()
    batchorder.INDEX_BUDGET = 24
    from torch.utils.data import DataLoader, TensorDataset
    ds = TensorDataset(torch.arange(24).float())
    first = DataLoader(ds, batch_size=8, shuffle=True, num_workers=2, persistent_workers=True)
    second = DataLoader(ds, batch_size=6)
    for epoch in range(2):
        for batch in first:
            pass
    seen = [batch[0].long().tolist() for batch in second]
    print(seen)
    """
)


def test_every_batch_feeds_a_running_digest_with_its_indices_within_the_budget(tmp_path: Path) -> None:
    env = {**os.environ, "REPRO_RUN_ID": "t", "REPRO_RUNTIME_DIR": str(tmp_path)}
    env.pop("RANK", None)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (tmp_path / "dataorder.jsonl").read_text().splitlines()]
    seeds = [r for r in rows if "base_seed" in r]
    batches = [r for r in rows if "step" in r]
    # persistent workers: one iterator, two epochs, one base seed; the second loader: its own
    assert [(r["loader"], r["epoch"], r["workers"]) for r in seeds] == [(0, 0, 2), (0, 1, 2), (1, 0, 0)]
    assert seeds[0]["base_seed"] == seeds[1]["base_seed"] != seeds[2]["base_seed"]
    assert [(r["loader"], r["epoch"], r["step"]) for r in batches] == [
        (0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 1, 3), (0, 1, 4), (0, 1, 5),
        (1, 0, 0), (1, 0, 1), (1, 0, 2), (1, 0, 3),
    ]  # fmt: skip
    epoch0 = [i for r in batches[:3] for i in r["indices"]]
    assert sorted(epoch0) == list(range(24))  # what the sampler gave, before the workers
    assert "indices" not in batches[3] and all(r["n"] in (6, 8) for r in batches)  # past the budget of 24
    assert len({r["digest"] for r in batches}) == len(batches)
    assert json.loads(done.stdout.strip()) == [list(range(i, i + 6)) for i in range(0, 24, 6)]  # unchanged


PIN_MEMORY = textwrap.dedent(
    """
    import torch
    from repro.runtime import boot
    boot.boot()
    from torch.utils.data import DataLoader, TensorDataset
    ds = TensorDataset(torch.arange(16).float())
    loader = DataLoader(ds, batch_size=4, pin_memory=True)  # as the examples write it, on a CPU box
    for epoch in range(2):
        for batch in loader:
            pass
    """
)


def test_a_warning_torch_gives_keeps_the_frame_it_would_have_without_repro(tmp_path: Path) -> None:
    """torch's pin_memory warning (stacklevel=2) names torch's own frame, as without repro, never the
    runtime's wrapper; user filters still apply, and it is shown once as Python's default rule says."""
    import torch

    if torch.accelerator.is_available():  # pragma: no cover - the warning is for machines without one
        return
    env = {**os.environ, "REPRO_RUN_ID": "t", "REPRO_RUNTIME_DIR": str(tmp_path)}
    env.pop("RANK", None)
    env.pop("PYTHONWARNINGS", None)
    script = tmp_path / "train.py"
    script.write_text(PIN_MEMORY)
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "pin_memory" in line and "Warning" in line]
    assert len(lines) == 1, done.stderr
    assert "repro/runtime" not in lines[0] and "torch/utils/data/dataloader.py" in lines[0]
    quiet = subprocess.run(
        [sys.executable, "-W", "ignore::UserWarning", str(script)], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert quiet.returncode == 0 and "pin_memory" not in quiet.stderr
