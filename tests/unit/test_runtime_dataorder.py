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
    from repro.runtime import boot, dataorder
    boot.boot()
    dataorder.INDEX_BUDGET = 24
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
