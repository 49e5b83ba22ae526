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

import base64
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


def _generator() -> Any:
    return getattr(sys.modules.get("torch"), "default_generator", None)


def before_begin() -> Any:
    """torch's RNG state before a new iterator draws its worker seed, while a recorded epoch waits."""
    generator = _generator()
    if generator is None or not _pending or not enabled():
        return None
    return generator.get_state()


def began(it: Any, before: Any = None) -> None:
    """A new iterator, its workers not started yet: continue a recorded epoch when one is pending."""
    if not enabled():
        return
    length = _length(it)
    it._repro_pos, it._repro_round, it._repro_start = 0, 0, 0
    generator = _generator()
    if generator is not None:
        it._repro_rng = generator.get_state()  # where its sampler draws its order from: the epoch's
    for i, entry in enumerate(_pending):
        if length is not None and length <= int(entry.get("length", -1)):
            _continue(it, entry, length, before)
            del _pending[i]
            resumestate.event("restored", stream="dataloader", position=it._repro_pos, length=length)
            break
    _live.append(weakref.ref(it))
    del _live[:-LIVE]


def _continue(it: Any, entry: dict[str, Any], length: int, before: Any) -> None:
    """``it`` continues the recorded epoch: its worker seed, its batches' places, and (where the state
    it was drawn from is recorded) its sampler's order; torch's stream goes on as if it drew nothing.

    A shorter iterator (a skipping batch sampler, Accelerate's ``skip_first_batches``) begins at
    the place of its first batch; a loop that takes the rest of the epoch from a whole new iterator
    and counts the batches it took (Lightning's fit loop: ``taken``) has those left out."""
    it._base_seed, it._repro_round = int(entry["base_seed"]), int(entry.get("round", 0))
    it._repro_pos = it._repro_start = int(entry["length"]) - length  # what a shorter one skips
    taken, rng, generator = entry.get("taken"), entry.get("rng"), _generator()
    if before is None or generator is None:
        return
    generator.set_state(before)  # its worker seed is the recorded one: undrawn
    if isinstance(rng, str):
        it._repro_rng = before.new_tensor(list(base64.b64decode(rng)))
        it._repro_epoch = True
        if isinstance(taken, int) and length == int(entry["length"]):
            it._repro_skip = taken


def enter_epoch(it: Any) -> Any:
    """Before a continuing iterator's first batch: torch's state set to the one its epoch's order was
    drawn from, and the batches already taken left out; returns the state to go back to after."""
    if not getattr(it, "_repro_epoch", False):
        return None
    it._repro_epoch = False
    generator = _generator()
    now = generator.get_state()
    generator.set_state(it._repro_rng)
    taken = int(getattr(it, "_repro_skip", 0))
    try:
        for _ in range(taken):
            next(it._sampler_iter)
    except StopIteration:
        pass
    it._repro_pos += taken
    if taken:
        resumestate.event("restored", stream="dataloader", position=taken, length=_length(it))
    return now


def leave_epoch(now: Any) -> None:
    """After that first batch: torch's stream where it was (the order drawn from the epoch's state)."""
    if now is not None:
        _generator().set_state(now)


def taken(count: int) -> None:
    """The batches of the recorded epoch that the resumed loop counts as taken (Lightning's progress)."""
    if _pending and count > 0:
        _pending[0]["taken"] = count


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
            entry: dict[str, Any] = {"base_seed": seed, "round": round_, "yielded": yielded, "length": full}
            rng = getattr(it, "_repro_rng", None)
            if rng is not None:  # torch's state its order was drawn from
                entry["rng"] = base64.b64encode(bytes(rng.tolist())).decode("ascii")
            found.append(entry)
    return found


def restore(recorded: list[dict[str, Any]]) -> None:
    """The recorded epochs that the next iterators begun in this process continue."""
    _pending[:] = [e for e in recorded if isinstance(e, dict) and isinstance(e.get("base_seed"), int)]
