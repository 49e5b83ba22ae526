"""A resume spoiled on purpose, the negative control of `repro check --interrupt --control`.

With ``REPRO_RESUME_CONTROL=rng`` in a resumed process, no RNG stream is put back: the runtime
restores none of the states recorded with the checkpoint (nor a DataLoader epoch's worker
seeds), and the script's or framework's own restores — ``torch.set_rng_state``,
``torch.random.set_rng_state``, ``torch.cuda.set_rng_state(_all)``, ``random.setstate``,
``numpy.random.set_state`` (the Hugging Face ``Trainer``'s ``rng_state.pth``, Lightning's) —
do nothing. Every stream of every rank goes on from where the fresh process has it, so a check
whose outputs depend on them must see the resume differ.

Standard library only; torch and NumPy are reached through the modules the script imported.
"""

from __future__ import annotations

import functools
import os
import random
from types import ModuleType
from typing import Any

from repro.runtime import contract, resumestate

RNG = "rng"


def active() -> bool:
    """True in a resumed process whose RNG restore is to be spoiled."""
    return resumestate.resuming() and os.environ.get(contract.RESUME_CONTROL_ENV) == RNG


def _ignored(owner: Any, name: str) -> None:
    original = getattr(owner, name, None)
    if original is None or getattr(original, "_repro_spoiled", False):
        return

    def ignored(*args: Any, **kwargs: Any) -> None:
        resumestate.state["spoiled"] = resumestate.state.get("spoiled", 0) + 1

    ignored._repro_spoiled = True  # type: ignore[attr-defined]
    setattr(owner, name, functools.update_wrapper(ignored, original))


def install_torch(torch: ModuleType) -> None:
    """The script's torch RNG restores do nothing (and ``random``'s, imported by then)."""
    if not active():
        return
    resumestate.event("control", spoiled=RNG)
    _ignored(random, "setstate")
    for owner in (torch, getattr(torch, "random", None), getattr(torch, "cuda", None)):
        if owner is not None:
            for name in ("set_rng_state", "set_rng_state_all"):
                _ignored(owner, name)


def install_numpy(np: ModuleType) -> None:
    if active() and hasattr(np, "random"):
        _ignored(np.random, "set_state")
