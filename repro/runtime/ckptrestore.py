"""Restoring at a load in a resumed run: the first load of a checkpoint whose hash has recorded RNG
states puts them back right after it; a checkpoint loaded without one is reported.

In a resumed run (``REPRO_RESUMED_FROM`` set; the states of the chain are put in ``rng/``),
the restore comes right after the load, so DataLoader iterators created afterwards (sampler
order, worker base seeds and with them NumPy/``random`` in the workers) and dropout continue
the same streams. A checkpoint loaded without a recorded state: that resume will not be exact.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from repro.runtime import ckptfiles, ckptrecord, resumestate, rngstates, spoil


def before_load(f: Any) -> str | None:
    """The hash of a checkpoint about to be loaded, when this resumed process still has to restore."""
    path = ckptrecord.path_of(f)
    d = resumestate.runtime_dir()
    if path is None or resumestate.state["restored"] or not resumestate.resuming() or d is None:
        return None
    ckptrecord.wait(path)
    try:
        if not os.path.isfile(path):
            return None
        quick = ckptfiles.stat_key(path)
        return (
            quick
            if ckptfiles.state_path(d, quick, resumestate.rank()).is_file()
            else ckptfiles.file_sha256(path)
        )
    except OSError:
        return None


def after_load(f: Any, digest: str | None) -> None:
    d = resumestate.runtime_dir()
    if digest is None or d is None:
        return
    path = ckptfiles.state_path(d, digest, resumestate.rank())
    shown = ckptfiles.shown_path(ckptrecord.path_of(f) or "?")
    if not path.is_file():
        resumestate.event("missing", path=shown, hash=digest)
        sys.stderr.write(
            f"repro: warning: checkpoint {shown} has no recorded RNG state for rank {resumestate.rank()}; "
            "this resume will not be exact (was it saved outside this run's chain?)\n"
        )
        return
    body = json.loads(path.read_text(encoding="utf-8"))
    streams = [] if spoil.active() else rngstates.restore_states(body["states"])  # `check --control`
    resumestate.state["restored"] = True
    resumestate.state["step"] = int(body.get("step", 0))
    resumestate.state["ring"].clear()
    resumestate.event("restored", path=shown, hash=digest, step=resumestate.state["step"], streams=streams)
