"""The training state beyond tensors and RNG streams that a resume must bring back, watched with no
change to the script: each learning-rate scheduler's ``last_epoch`` and each sampler's epoch
(``DistributedSampler.set_epoch``), by creation order, for the resume trace.

With ``REPRO_RESUME_CONTROL=sampler`` in a resumed process (`repro check --interrupt --control`),
every ``set_epoch`` of a sampler does nothing: it shuffles as in epoch 0, whatever epoch the
script resumes in.

Standard library only; the classes are torch's, reached through the module the script imported.
"""

from __future__ import annotations

import functools
import importlib
import os
import weakref
from types import ModuleType
from typing import Any

from repro.runtime import contract, resumestate

SAMPLER = "sampler"  # the control that resets every sampler's epoch
LIVE = 64  # schedulers and samplers remembered per process (the most recent ones)

_schedulers: list[weakref.ref[Any]] = []
_samplers: list[weakref.ref[Any]] = []


def spoiled() -> bool:
    """True in a resumed process whose samplers' epochs are to be reset (the sampler control)."""
    return resumestate.resuming() and os.environ.get(contract.RESUME_CONTROL_ENV) == SAMPLER


def _remember(kept: list[weakref.ref[Any]], obj: Any) -> None:
    kept[:] = [r for r in kept if r() is not None][-(LIVE - 1) :]
    try:
        kept.append(weakref.ref(obj))
    except TypeError:
        pass


def _wrap_init(cls: Any, kept: list[weakref.ref[Any]]) -> None:
    original = cls.__init__
    if getattr(original, "_repro_watched", False):
        return

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        _remember(kept, self)

    init._repro_watched = True  # type: ignore[attr-defined]
    cls.__init__ = functools.update_wrapper(init, original)


def _reset_epochs(cls: Any) -> None:
    original = cls.set_epoch

    def set_epoch(self: Any, epoch: int) -> None:
        resumestate.state["spoiled"] = resumestate.state.get("spoiled", 0) + 1

    cls.set_epoch = functools.update_wrapper(set_epoch, original)


def install(torch: ModuleType) -> None:
    """Watch torch's schedulers and distributed samplers (and reset the samplers' epochs in a control)."""
    try:
        schedulers = importlib.import_module("torch.optim.lr_scheduler")
        distributed = importlib.import_module("torch.utils.data.distributed")
    except ImportError:
        return
    base = getattr(schedulers, "LRScheduler", None) or getattr(schedulers, "_LRScheduler", None)
    if base is not None:
        _wrap_init(base, _schedulers)
    sampler = getattr(distributed, "DistributedSampler", None)
    if sampler is not None:
        _wrap_init(sampler, _samplers)
        if spoiled():
            resumestate.event("control", spoiled=SAMPLER)
            _reset_epochs(sampler)


def scheduler_epochs(optimizer: Any) -> list[int]:
    """``last_epoch`` of each live scheduler of ``optimizer``, by creation order."""
    found = (r() for r in _schedulers)
    return [int(s.last_epoch) for s in found if s is not None and getattr(s, "optimizer", None) is optimizer]


def sampler_epochs() -> list[int]:
    """The epoch of each live distributed sampler, by creation order."""
    found = (r() for r in _samplers)
    return [int(s.epoch) for s in found if s is not None and isinstance(getattr(s, "epoch", None), int)]
