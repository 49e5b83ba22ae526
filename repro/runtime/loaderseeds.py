"""DataLoader worker streams that a mid-epoch resume can continue: each batch seeded by its place.

torch seeds each worker once per epoch from a base seed the iterator draws when the epoch begins;
what a worker draws for a batch (its augmentation) then depends on every batch it loaded before.
A framework that resumes mid-epoch (the Hugging Face ``Trainer`` through Accelerate's
``skip_first_batches``) begins a new iterator over the rest of the epoch: a new base seed,
drawn before the framework puts its RNG state back, and batches dealt to other workers — every
batch after the resume point is augmented otherwise than in an uninterrupted run.

In a run, therefore, a worker seeds ``random``, NumPy's global state and torch right before it
loads each batch, from (base seed, epoch of a persistent iterator, position of the batch in the
epoch): a batch's augmentation depends on nothing else. A checkpoint's record keeps, for each
iterator in the middle of its epoch (some but not all batches yielded), its base seed, round and
length; after the restore, the first iterator begun whose length is at most that one continues
it: same base seed, its positions counted from the batches the shorter iterator leaves out.

Only where the run's record asks for it (``contract.LOADER_SEEDS_ENV``, set by repro for a new run in a
pinned mode and kept in ``determinism.env``): a replay of a run recorded before, or in mode off, draws
in its workers as torch alone does.

Standard library only; the iterators are torch's, seen through `batchorder`'s hook.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import weakref
from typing import Any

from repro.runtime import contract, resumestate

LIVE = 8  # iterators remembered per process (the most recent ones)

_live: list[weakref.ref[Any]] = []
_pending: list[dict[str, Any]] = []


class SeededBatch(list[Any]):
    """A batch of sample indices, with the seed its worker sets before loading them."""

    seed: int = 0

    def __reduce__(self) -> tuple[Any, tuple[list[Any], int]]:  # to the worker, as cheaply as a list
        return _seeded, (list(self), self.seed)


def _seeded(items: list[Any], seed: int) -> SeededBatch:
    batch = SeededBatch(items)
    batch.seed = seed
    return batch


def _length(it: Any) -> int | None:
    try:
        return len(it)
    except (TypeError, NotImplementedError, AttributeError):
        return None  # an IterableDataset without a length: its position is its own


def enabled() -> bool:
    """Whether this run seeds each batch by its place (its record says so)."""
    return os.environ.get(contract.LOADER_SEEDS_ENV) == "1"


def began(it: Any) -> None:
    """A new iterator, its workers not started yet: continue a recorded epoch when one is pending."""
    if not enabled():
        return
    length = _length(it)
    it._repro_pos, it._repro_round, it._repro_start = 0, 0, 0
    for i, entry in enumerate(_pending):
        if length is not None and length <= int(entry.get("length", -1)):
            it._base_seed = int(entry["base_seed"])
            it._repro_pos = it._repro_start = int(entry["length"]) - length  # what a shorter one skips
            it._repro_round = int(entry.get("round", 0))
            del _pending[i]
            resumestate.event("restored", stream="dataloader", position=it._repro_pos, length=length)
            break
    _live.append(weakref.ref(it))
    del _live[:-LIVE]


def new_round(it: Any) -> None:
    """A persistent iterator starts another epoch with the same workers and base seed."""
    it._repro_pos = it._repro_start = 0
    it._repro_round = int(getattr(it, "_repro_round", 0)) + 1


def seeded(it: Any, indices: Any) -> Any:
    """The batch ``indices`` that a worker process will load, carrying the seed it sets first."""
    if not isinstance(indices, list) or not int(getattr(it, "_num_workers", 0) or 0) or not enabled():
        return indices  # loaded in this process: its streams are the checkpoint's
    base, pos, round_ = getattr(it, "_base_seed", None), getattr(it, "_repro_pos", None), it._repro_round
    if not isinstance(base, int) or not isinstance(pos, int):
        return indices
    it._repro_pos = pos + 1
    batch = SeededBatch(indices)
    text = f"{base}:{round_}:{pos}".encode()
    batch.seed = int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 1
    return batch


def seed_worker(indices: Any) -> None:
    """In a worker, before it loads a batch: its streams from the batch's seed.

    Through the functions as they were before the runtime wrapped them (`seeding`): these seeds are
    the runtime's, not calls of the script's to report among its seeds.
    """
    seed = getattr(indices, "seed", None)
    if not isinstance(indices, SeededBatch) or not isinstance(seed, int):
        return
    _unwrapped(random.seed)(seed)
    torch = sys.modules.get("torch")
    generator = getattr(torch, "default_generator", None)
    if generator is not None:
        generator.manual_seed(seed)  # the CPU generator, as torch seeds a worker (without a device scan)
    np = sys.modules.get("numpy")
    if np is not None and hasattr(np, "random"):
        _unwrapped(np.random.seed)((seed ^ (seed >> 32)) & 0xFFFFFFFF)


def _unwrapped(fn: Any) -> Any:
    return getattr(fn, "__wrapped__", fn)


def capture() -> list[dict[str, Any]]:
    """The iterators in the middle of their epoch, the most recent first."""
    found: list[dict[str, Any]] = []
    if not enabled():
        return found
    for ref in reversed(_live):
        it = ref()
        length = None if it is None else _length(it)
        yielded = getattr(it, "_num_yielded", None)
        seed = getattr(it, "_base_seed", None)
        if length is None or not isinstance(yielded, int) or not isinstance(seed, int):
            continue
        if 0 < yielded < length:
            round_ = int(getattr(it, "_repro_round", 0))
            full = length + int(getattr(it, "_repro_start", 0))  # the epoch's batches, skipped ones too
            found.append({"base_seed": seed, "round": round_, "yielded": yielded, "length": full})
    return found


def restore(recorded: list[dict[str, Any]]) -> None:
    """The recorded epochs that the next iterators begun in this process continue."""
    _pending[:] = [e for e in recorded if isinstance(e, dict) and isinstance(e.get("base_seed"), int)]
