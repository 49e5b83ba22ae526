"""The order in which each DataLoader yielded samples, recorded with no change to the script.

Standard library only; torch's DataLoader is reached through the module the script imported.

Every batch of indices a DataLoader iterator takes from its sampler (``_next_index``, in the
training process, before the indices go to the workers) feeds a running digest of that
loader; each batch appends one line to ``dataorder.jsonl`` (a torchrun rank R:
``dataorder.rankR.jsonl``)::

    {"loader": L, "epoch": E, "step": S, "digest": "<16 hex>", "n": N, "indices": [...]}

``loader`` numbers the DataLoaders by creation order, ``step`` counts the batches a loader
yielded over all its epochs, ``digest`` covers every index of steps 0..S, ``indices`` are
kept within a budget (the first steps). Past `EVERY_STEP_UNTIL` steps a loader writes every
`SPARSE_EVERY`-th step only; the digest still covers them all. Each iteration over a loader
(an epoch) also writes the base seed its workers are seeded from::

    {"loader": L, "epoch": E, "base_seed": B, "workers": W}

The same hook hands each batch to its worker with the seed the worker loads it with, so that a
mid-epoch resume continues the workers' streams (`loaderseeds`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import warnings
from types import CodeType, FrameType, ModuleType
from typing import Any

from repro.runtime import jsonl, loaderseeds

INDEX_BUDGET = 100_000  # sample indices kept per process (the first steps); digests for all
EVERY_STEP_UNTIL = 10_000  # steps of a loader that each get a line
SPARSE_EVERY = 100  # then one line every this many steps

_state: dict[str, Any] = {"loaders": 0, "kept": 0}
_appender = jsonl.Appender("dataorder", dumps=lambda row: json.dumps(row, default=str))  # a row at once


def _path() -> str | None:
    return jsonl.stream_path("dataorder")


def _write(row: dict[str, Any]) -> None:
    _appender.write(row)


def _loader_index(loader: Any) -> int:
    index = getattr(loader, "_repro_loader", None)
    return int(index) if isinstance(index, int) else _number(loader)  # created before the runtime saw it


def _number(loader: Any) -> int:
    index = int(_state["loaders"])
    _state["loaders"] += 1
    try:
        object.__setattr__(loader, "_repro_loader", index)
    except (AttributeError, TypeError):
        pass
    return index


def _begin(it: Any, loader: Any, epoch: int) -> None:
    """A new iteration over ``loader``: note its worker base seed."""
    index = _loader_index(loader)
    it._repro_order = {"loader": index, "epoch": epoch}
    workers = int(getattr(it, "_num_workers", 0) or 0)
    seed = getattr(it, "_base_seed", None)
    _write({"loader": index, "epoch": epoch, "base_seed": seed, "workers": workers})


def _epochs(loader: Any) -> int:
    """How many iterations over ``loader`` began before this one."""
    done = int(getattr(loader, "_repro_epochs", 0))
    try:
        object.__setattr__(loader, "_repro_epochs", done + 1)
    except (AttributeError, TypeError):
        pass
    return done


def _batch(it: Any, indices: Any) -> None:
    where = getattr(it, "_repro_order", None)
    if where is None or indices is None or (isinstance(indices, list) and all(i is None for i in indices)):
        return  # an IterableDataset: the dataset itself decides the order
    loader = where["loader"]
    steps: dict[int, list[Any]] = _state.setdefault("steps", {})
    step, digest = steps.get(loader, [0, ""])
    text = json.dumps(indices, default=str, separators=(",", ":"))
    _state["last"] = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
    digest = hashlib.blake2b((digest + text).encode(), digest_size=8).hexdigest()
    steps[loader] = [step + 1, digest]
    if step >= EVERY_STEP_UNTIL and step % SPARSE_EVERY:
        return
    count = len(indices) if isinstance(indices, (list, tuple)) else 1
    row: dict[str, Any] = {"loader": loader, "epoch": where["epoch"], "step": step}
    row.update(digest=digest, n=count)
    if _state["kept"] + count <= INDEX_BUDGET:
        _state["kept"] += count
        row["indices"] = indices
    _write(row)


def last_batch() -> str | None:
    """A fingerprint of the indices this process's DataLoaders took last (the batches ahead of the step)."""
    last = _state.get("last")
    return last if isinstance(last, str) else None


_WRAPPERS: set[CodeType] = set()  # the code of this module's wrappers: frames a warning never names


def install(module: ModuleType) -> None:
    """Wrap the DataLoader's constructor (numbering) and its iterators' index draws (digests)."""
    if _path() is None:
        return
    loader_cls = getattr(module, "DataLoader", None)
    base = getattr(module, "_BaseDataLoaderIter", None)
    if loader_cls is None or base is None or getattr(base, "_repro_wrapped", False):
        return
    init_loader, init_iter, reset, next_index = (
        loader_cls.__init__, base.__init__, base._reset, base._next_index
    )  # fmt: skip

    def loader_init(self: Any, *args: Any, **kwargs: Any) -> None:
        _as_caller(init_loader, self, *args, **kwargs)
        _number(self)

    def iter_init(self: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
        before = None
        try:
            before = loaderseeds.before_begin()
        except Exception:  # noqa: BLE001
            pass
        _as_caller(init_iter, self, loader, *args, **kwargs)
        _safely(lambda: loaderseeds.began(self, before))  # a resumed epoch's seed, before workers start
        _safely(lambda: _begin(self, loader, _epochs(loader)))

    def iter_reset(self: Any, loader: Any, first_iter: bool = False, *args: Any, **kwargs: Any) -> Any:
        result = reset(self, loader, first_iter, *args, **kwargs)
        if not first_iter:  # persistent workers: the same iterator starts another epoch
            _safely(lambda: loaderseeds.new_round(self))
            _safely(lambda: _begin(self, loader, _epochs(loader)))
        return result

    def iter_next_index(self: Any) -> Any:
        now = None
        try:
            now = loaderseeds.enter_epoch(self)  # a resumed epoch: its order, the batches taken left out
        except Exception:  # noqa: BLE001
            pass
        try:
            indices = next_index(self)  # StopIteration ends the epoch, as before
        finally:
            _safely(lambda: loaderseeds.leave_epoch(now))
        _safely(lambda: _batch(self, indices))
        try:
            return loaderseeds.seeded(self, indices)  # the seed its worker loads it with
        except Exception:  # noqa: BLE001
            return indices

    for owner, name, wrapper, original in (
        (loader_cls, "__init__", loader_init, init_loader),
        (base, "__init__", iter_init, init_iter),
        (base, "_reset", iter_reset, reset),
        (base, "_next_index", iter_next_index, next_index),
    ):
        setattr(owner, name, functools.update_wrapper(wrapper, original))
    _seed_in_workers()
    _WRAPPERS.update({loader_init.__code__, iter_init.__code__, _as_caller.__code__})
    base._repro_wrapped = True


def _seed_in_workers() -> None:
    """A worker seeds its streams from the batch it is about to load (`loaderseeds`)."""
    fetch = sys.modules.get("torch.utils.data._utils.fetch")
    fetcher = getattr(fetch, "_MapDatasetFetcher", None)
    if fetcher is None:
        return
    original = fetcher.fetch

    def wrapped_fetch(self: Any, possibly_batched_index: Any) -> Any:
        _safely(lambda: loaderseeds.seed_worker(possibly_batched_index))
        return original(self, possibly_batched_index)

    fetcher.fetch = functools.update_wrapper(wrapped_fetch, original)


def _as_caller(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a wrapped torch function so that the warnings it gives name the frame they would name
    without the wrapper (torch's pin_memory warning, stacklevel=2): while it runs, a ``warnings.warn``
    whose stacklevel lands on a wrapper of this module lands on the wrapper's caller instead. The
    user's filters and Python's once-per-place rule apply as without repro."""
    original = warnings.warn
    if getattr(original, "_repro_shim", False):  # already inside one: the outer shim does it
        return fn(*args, **kwargs)

    def warn(message: Any, category: Any = None, stacklevel: int = 1, *rest: Any, **kw: Any) -> None:
        frame: FrameType | None = sys._getframe(1)  # the code that called warn: stacklevel 1
        for _ in range(max(stacklevel, 1) - 1):
            frame = frame.f_back if frame is not None else None
        skip = 0
        while frame is not None and frame.f_code in _WRAPPERS:
            frame, skip = frame.f_back, skip + 1
        original(message, category, stacklevel + 1 + skip, *rest, **kw)  # + 1: this frame

    warn._repro_shim = True  # type: ignore[attr-defined]
    warnings.warn = warn
    try:
        return fn(*args, **kwargs)
    finally:
        warnings.warn = original


def _safely(fn: Any) -> None:
    """The user's training must go on whatever happens to the record (a full disk, an odd sampler)."""
    try:
        fn()
    except Exception:  # noqa: BLE001
        pass
