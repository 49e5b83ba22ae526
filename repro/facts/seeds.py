"""Seeds: the master seed and everything derived from it."""

from __future__ import annotations

import secrets

from repro import ranges
from repro.errors import UsageError
from repro.runtime import contract
from repro.store.record import SeedInfo

SEED_MAX = 2**31 - 1  # drawn seeds stay below this (any seed in ranges.SEED may be given)


def make_seeds(master: int | None, world_size: int = 1) -> SeedInfo:
    """The master seed (drawn when not given) and the per-library and per-rank seeds.

    Every RNG of the process is seeded with the master seed (so `--seed 42` means what
    `torch.manual_seed(42)` means); each rank r of a multi-process run uses master + r.
    DataLoader workers are seeded by torch from the seeded main-process RNG.

    Raises:
        UsageError: a given seed outside 0..2**32-1 (`repro.capture(seed=…)`; flags are checked
            with the settings).
    """
    why = None if master is None else ranges.SEED.problem(master)
    if why:
        raise UsageError(f"the seed {why}", hint="give a seed in 0..4294967295")
    drawn = master is None
    seed = secrets.randbelow(SEED_MAX) if master is None else int(master)
    derived = {"python": seed, "numpy": seed, "torch": seed, "cuda": seed}
    info = SeedInfo(master=seed, drawn=drawn, pythonhashseed=seed % contract.SEED_SPACE, derived=derived)
    if world_size > 1:
        info.per_rank = {
            str(rank): {name: contract.rank_seed(value, rank) for name, value in derived.items()}
            for rank in range(world_size)
        }
    return info
