"""repro.checkpoint: save/load with the RNG states, and a DataLoader that continues mid-epoch.

In-process and tiny; the exactness of a real resume across processes (with DataLoader
workers and a SIGKILL) is tested in tests/integration/test_resume_real.py.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import Dataset

import repro
from repro.checkpoint import ResumableLoader


class Noisy(Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor([float(i), random.random(), float(np.random.rand()), float(torch.rand(1))])


def _epoch(loader: ResumableLoader) -> list[torch.Tensor]:
    return [batch for batch in loader]


def test_the_api_is_reexported() -> None:
    assert repro.checkpoint.ResumableLoader is ResumableLoader


def test_a_loader_saved_mid_epoch_continues_with_the_same_samples_and_augmentation() -> None:
    whole = ResumableLoader(Noisy(), batch_size=3, seed=11)
    reference = _epoch(whole) + _epoch(whole)
    assert whole.state_dict() == {"epoch": 2, "position": 0, "seed": 11}

    first = ResumableLoader(Noisy(), batch_size=3, seed=11)
    seen = []
    for batch in first:
        seen.append(batch)
        if len(seen) == 2:
            break
    saved = first.state_dict()
    assert saved["position"] == 2 and saved["epoch"] == 0
    again = ResumableLoader(Noisy(), batch_size=3, seed=99)
    again.load_state_dict(saved)
    resumed = seen + _epoch(again) + _epoch(again)
    assert len(resumed) == len(reference)
    assert all(torch.equal(a, b) for a, b in zip(reference, resumed, strict=True))


def test_the_loader_leaves_the_main_processs_streams_alone() -> None:
    torch.manual_seed(0)
    random.seed(0)
    expected = (torch.rand(2), random.random())
    torch.manual_seed(0)
    random.seed(0)
    _epoch(ResumableLoader(Noisy(), batch_size=4, seed=3))
    assert torch.equal(torch.rand(2), expected[0]) and random.random() == expected[1]


def test_save_and_load_restore_objects_values_and_rng(tmp_path: Path) -> None:
    model = nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    path = tmp_path / "ck" / "last.pt"
    repro.checkpoint.save(path, model=model, optimizer=optimizer, epoch=3)
    expected = (torch.rand(3), random.random())
    assert not list(path.parent.glob("*.tmp-*"))

    fresh = nn.Linear(2, 2)
    state = repro.checkpoint.load(path, model=fresh, optimizer=torch.optim.SGD(fresh.parameters(), lr=0.5))
    assert state is not None and state["epoch"] == 3
    assert torch.equal(fresh.weight, model.weight)
    assert torch.equal(torch.rand(3), expected[0]) and random.random() == expected[1]


def test_load_without_a_checkpoint_is_none_and_a_missing_name_is_named(tmp_path: Path) -> None:
    assert repro.checkpoint.load(tmp_path / "none.pt") is None
    repro.checkpoint.save(tmp_path / "c.pt", epoch=1)
    with pytest.raises(KeyError, match="holds no 'model'"):
        repro.checkpoint.load(tmp_path / "c.pt", model=nn.Linear(1, 1))
