"""Worker streams a mid-epoch resume continues, in a real process with real worker processes: the rest of
an epoch loaded by a new, shorter iterator (as Accelerate's ``skip_first_batches`` makes one) is augmented
as in the uninterrupted epoch once the checkpoint's states are restored; without them it is not. A loop
that refetches the whole epoch and counts the batches it took (Lightning's) gets the same rest."""

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
    import json, random, sys
    import numpy as np
    import torch
    from repro.runtime import boot
    boot.boot()
    from repro.runtime import rngstates
    from torch.utils.data import DataLoader, Dataset

    class Noisy(Dataset):
        def __len__(self):
            return 24
        def __getitem__(self, i):  # augmentation drawn in the worker from all three streams
            return torch.tensor([float(i), torch.rand(()).item(), random.random(), np.random.rand()])

    class Rest:  # the batches of an epoch after the first SKIP, as a skipping batch sampler gives them
        def __init__(self, order, skip):
            self.batches = [order[i:i + 4] for i in range(0, 24, 4)][skip:]
        def __iter__(self):
            return iter(self.batches)
        def __len__(self):
            return len(self.batches)

    torch.manual_seed(0)
    loader = DataLoader(Noisy(), batch_size=4, shuffle=True, num_workers=2)
    full, states = [], None
    for k, batch in enumerate(loader):
        full.append(batch.tolist())
        if k == 2:
            states = rngstates.capture_states()  # a checkpoint after 3 of 6 batches
    order = [int(row[0]) for batch in full for row in batch]
    if sys.argv[1] in ("restore", "refetch"):
        rngstates.restore_states(states)
    if sys.argv[1] == "refetch":  # a loop that counts 3 batches taken and refetches the whole epoch
        from repro.runtime import loaderseeds
        loaderseeds.taken(3)
    torch.manual_seed(123)  # the resumed process's RNG is elsewhere when its iterator begins
    if sys.argv[1] == "refetch":
        rest = DataLoader(Noisy(), batch_size=4, shuffle=True, num_workers=2)
    else:
        rest = DataLoader(Noisy(), batch_sampler=Rest(order, 3), num_workers=2)
    again = [batch.tolist() for batch in rest]
    after = torch.rand(()).item()
    torch.manual_seed(123)
    untouched = after == torch.rand(()).item()  # the iterator took nothing from torch's stream
    persistent = DataLoader(Noisy(), batch_size=4, num_workers=2, persistent_workers=True)
    epochs = [[batch.tolist() for batch in persistent] for _ in range(2)]
    print(json.dumps({"full": full, "rest": again, "loaders": states.get("dataloader"), "epochs": epochs,
                      "untouched": untouched}))
    """
)


def _run(tmp_path: Path, mode: str, recorded: bool = True) -> dict[str, Any]:
    env = {**os.environ, "REPRO_RUN_ID": "t", "REPRO_RUNTIME_DIR": str(tmp_path / f"{mode}-{recorded}")}
    env.pop("RANK", None)
    env.pop("REPRO_LOADER_SEEDS", None)
    if recorded:  # as a new run in a pinned mode, and its replays, get it from the record
        env["REPRO_LOADER_SEEDS"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_rest_of_an_epoch_is_augmented_as_uninterrupted_once_restored(tmp_path: Path) -> None:
    restored = _run(tmp_path, "restore")
    (entry,) = restored["loaders"]
    assert isinstance(entry.pop("rng"), str)  # torch's state the epoch's order was drawn from
    assert entry == {"base_seed": entry["base_seed"], "round": 0, "yielded": 3, "length": 6}
    assert restored["rest"] == restored["full"][3:]  # same samples, same augmentation, bit for bit
    assert restored["untouched"] is True
    first, second = restored["epochs"]
    assert first != second  # a persistent iterator's epochs draw afresh

    plain = _run(tmp_path, "plain")
    assert [[row[0] for row in b] for b in plain["rest"]] == [
        [row[0] for row in b] for b in plain["full"][3:]
    ]
    # the same samples, augmented otherwise: what was restored matters
    assert plain["rest"] != plain["full"][3:]


def test_a_run_recorded_without_batch_seeds_draws_in_its_workers_as_torch_does(tmp_path: Path) -> None:
    """A replay of a run recorded before batches were seeded by their place (or in mode off) gets no
    such seeds: its workers draw as they did when it was recorded, and a checkpoint keeps no epoch."""
    old = _run(tmp_path, "restore", recorded=False)
    assert not old["loaders"]
    assert old["rest"] != old["full"][3:]


def test_a_pinned_mode_records_batch_seeds_and_a_replay_keeps_them() -> None:
    from repro.facts import determinism
    from repro.runtime import contract

    assert determinism.plan("strict", 1, None).env[contract.LOADER_SEEDS_ENV] == "1"
    assert contract.LOADER_SEEDS_ENV not in determinism.plan("off", 1, None).env
    assert contract.LOADER_SEEDS_ENV in determinism.RECORD_ENV


def test_a_loop_that_refetches_the_whole_epoch_gets_its_rest_in_the_same_order_and_augmentation(
    tmp_path: Path,
) -> None:
    """Lightning's fit loop resumed mid-epoch begins a new iterator over the whole epoch and counts the
    batches it took: that iterator draws the recorded order and leaves those batches out."""
    refetched = _run(tmp_path, "refetch")
    assert refetched["rest"] == refetched["full"][3:] and refetched["untouched"] is True
