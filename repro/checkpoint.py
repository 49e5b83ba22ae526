"""Exact resume from anywhere, even mid-epoch: `save`/`load` and a DataLoader that knows its position.

Standard library at import; torch is imported when a function needs it. Works under
`repro run` and without it.

    import repro.checkpoint as ckpt

    loader = ckpt.ResumableLoader(dataset, batch_size=32, shuffle=True, num_workers=2)
    state = ckpt.load("checkpoints/last.pt", model=model, optimizer=opt, scheduler=sched, loader=loader)
    start = state["epoch"] if state else 0
    for epoch in range(start, epochs):
        for x, y in loader:                     # continues at the batch after the one saved
            ...
            ckpt.save("checkpoints/last.pt", model=model, optimizer=opt, scheduler=sched,
                      loader=loader, epoch=epoch)

`save` writes, atomically, each object's ``state_dict()`` (other values as they are) and
every RNG state of this process; `load` puts the state dicts back into the objects given,
restores the RNG states and returns the saved values. `ResumableLoader` draws each epoch's
order from (seed, epoch) and seeds `random`, NumPy and torch before every sample from
(seed, epoch, position), in the worker processes as in the main one, so augmentation in
``__getitem__`` does not depend on which worker fetched a sample or where the run resumed.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
from collections.abc import Iterator
from typing import Any

from repro.runtime import resumestate, rngstates

_META = "__repro_checkpoint__"
FORMAT = 1


def _torch() -> Any:
    import torch

    return torch


def save(path: str | os.PathLike[str], **state: Any) -> None:
    """Save ``state`` (objects with ``state_dict()`` by their state dict) and this process's RNG states.

    Written to a temporary file and renamed: a kill while saving leaves the previous checkpoint.
    """
    torch = _torch()
    payload = {name: obj.state_dict() if hasattr(obj, "state_dict") else obj for name, obj in state.items()}
    payload[_META] = {"format": FORMAT, "rng": rngstates.capture_states(), "step": resumestate.current_step()}
    target = os.fspath(path)
    folder = os.path.dirname(target)
    if folder:
        os.makedirs(folder, exist_ok=True)
    tmp = f"{target}.tmp-{os.getpid()}"
    torch.save(payload, tmp)
    os.replace(tmp, target)


def load(path: str | os.PathLike[str], **objects: Any) -> dict[str, Any] | None:
    """Load a checkpoint written by `save` into ``objects`` and restore the RNG states; None when absent.

    Returns the saved values by name (state dicts included).

    Raises:
        KeyError: an object was given whose name the checkpoint does not hold.
    """
    if not os.path.isfile(path):
        return None
    payload = _torch().load(path)
    for name, obj in objects.items():
        if name not in payload:
            raise KeyError(f"checkpoint {os.fspath(path)} holds no {name!r} (it holds {sorted(payload)})")
        obj.load_state_dict(payload[name])
    meta = payload.pop(_META, None)
    if isinstance(meta, dict):
        rngstates.restore_states(meta.get("rng", {}))
        resumestate.set_step(int(meta.get("step", 0)))
    return dict(payload)


def _sample_seed(seed: int, epoch: int, position: int) -> int:
    digest = hashlib.sha256(f"{seed}:{epoch}:{position}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


class _Seeded:
    """A dataset whose items are fetched by ``(epoch, position, index)``, each with RNGs seeded from it."""

    def __init__(self, dataset: Any, seed: int) -> None:
        self.dataset, self.seed = dataset, seed

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key: tuple[int, int, int]) -> Any:
        epoch, position, index = key
        torch = _torch()
        in_main = torch.utils.data.get_worker_info() is None
        saved = rngstates.capture_states() if in_main else None  # the main process's streams go on untouched
        seed = _sample_seed(self.seed, epoch, position)
        random.seed(seed)
        np = sys.modules.get("numpy")
        if np is not None:
            np.random.seed(seed % 2**32)
        torch.manual_seed(seed)
        try:
            return self.dataset[index]
        finally:
            if saved is not None:
                rngstates.restore_states(saved)


class ResumableLoader:
    """A DataLoader that can be saved in the middle of an epoch and continue there, sample for sample.

    ``seed`` defaults to torch's initial seed (the run's seed under repro); the other keyword
    arguments go to ``torch.utils.data.DataLoader`` (num_workers, collate_fn, pin_memory…).
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        shuffle: bool = True,
        drop_last: bool = False,
        seed: int | None = None,
        **loader_kwargs: Any,
    ) -> None:
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, shuffle, drop_last
        self.seed = int(seed if seed is not None else _torch().initial_seed()) & (2**63 - 1)
        self.loader_kwargs = loader_kwargs
        self.epoch = 0
        self.position = 0  # batches of the current epoch handed out so far

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _order(self, epoch: int) -> list[int]:
        torch = _torch()
        n = len(self.dataset)
        if not self.shuffle:
            return list(range(n))
        generator = torch.Generator().manual_seed(_sample_seed(self.seed, epoch, -1))
        return [int(i) for i in torch.randperm(n, generator=generator)]

    def _batches(self, epoch: int) -> list[list[tuple[int, int, int]]]:
        order = self._order(epoch)
        keys = [(epoch, position, index) for position, index in enumerate(order)]
        batches = [keys[i : i + self.batch_size] for i in range(0, len(keys), self.batch_size)]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        return batches

    def __iter__(self) -> Iterator[Any]:
        torch = _torch()
        epoch = self.epoch
        batches = self._batches(epoch)[self.position :]
        # The loader's own base-seed draw comes from a generator of its own, never the global stream.
        generator = torch.Generator().manual_seed(_sample_seed(self.seed, epoch, -2))
        loader = torch.utils.data.DataLoader(
            _Seeded(self.dataset, self.seed), batch_sampler=batches, generator=generator, **self.loader_kwargs
        )
        for batch in loader:
            self.position += 1
            yield batch
        self.epoch, self.position = epoch + 1, 0

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position, self.seed = int(state["epoch"]), int(state["position"]), int(state["seed"])
