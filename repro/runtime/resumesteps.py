"""What exact resume does at each optimizer step: count it, keep a non-saving rank's recent states and
write the one a checkpoint was taken at, trace what decides the step, and stop or kill on request.

In a multi-process run the ranks that do not save (rank 0 usually saves alone) keep their states
of the last few optimizer steps in memory and write the one of the step the checkpoint was taken
at as soon as they see the saver's mark (``rng/marks/<step>.<sha256>``), at most a step later;
their states of the last few steps are also kept in ``rng/ring/``, where the host finds one a
kill left unwritten. For `repro check --interrupt`: with ``REPRO_RESUME_TRACE=1`` every optimizer
step appends what decides it (parameter, gradient and optimizer-state fingerprints, learning rates, each
scheduler's ``last_epoch``, each distributed sampler's epoch, a fingerprint of the batch indices
taken last and of each RNG stream) to ``rtrace.rank<R>.jsonl``; ``REPRO_INTERRUPT_AT_STEP=N``
SIGKILLs rank 0's process group (its DataLoader workers included) right after optimizer step N.
For `repro replay --from`: ``REPRO_STOP_AFTER_STEPS=K`` ends each process K optimizer steps after
its restore.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from repro.runtime import (
    batchorder,
    ckptfiles,
    ckptrecord,
    contract,
    jsonl,
    resumestate,
    rngstates,
    staterecord,
    statewatch,
    steptrace,
)

_rtrace = jsonl.Appender(  # buffered: written every second, at exit, and before the runtime ends the process
    "rtrace", dumps=lambda row: json.dumps(row, default=str), flush_seconds=1.0, flush_bytes=1 << 16
)
RING = 8  # optimizer steps of state a non-saving rank keeps in memory


def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    _write_trace_row(optimizer)
    resumestate.state["step"] += 1
    d = resumestate.runtime_dir()
    if d is None:
        return
    if resumestate.world() > 1:
        ring = resumestate.state["ring"]
        states = ring[resumestate.state["step"]] = rngstates.capture_states()
        while len(ring) > RING:
            ring.popitem(last=False)
        # Also on disk: a kill between another rank's save and this rank's next look at the marks
        # would lose this rank's state of the checkpointed step; the host finds it here instead.
        body = {"step": resumestate.state["step"], "rank": resumestate.rank(), "states": states}
        slot = (
            d
            / contract.RNG_DIR
            / contract.RING_DIR
            / f"rank{resumestate.rank()}.{resumestate.state['step'] % RING}.json"
        )
        ckptfiles.durable_write(slot, json.dumps(body))
        _write_marked(d)
    window = os.environ.get(contract.STOP_AFTER_STEPS_ENV)
    if window and window.isdigit() and resumestate.state["restored"]:
        resumestate.state["window"] = resumestate.state.get("window", 0) + 1
        if resumestate.state["window"] >= int(window):  # `repro replay --from`: the window is done
            ckptrecord.wait()
            steptrace.flush()
            _rtrace.flush()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
    stop = os.environ.get(contract.INTERRUPT_AT_STEP_ENV)
    if (
        stop
        and stop.isdigit()
        and resumestate.state["step"] == int(stop)
        and not resumestate.resuming()
        and resumestate.rank() == 0
    ):
        resumestate.event("interrupting", step=resumestate.state["step"])
        # the checkpoint's hash of this step is on disk (the kill is the harness's, not a race)
        ckptrecord.wait()
        steptrace.flush()
        _rtrace.flush()
        os.killpg(os.getpgrp(), 9)  # what a preempted node does to the whole job: SIGKILL, no clean-up


def flush_trace() -> None:
    """Write the resume trace's buffered rows (at exit)."""
    _rtrace.flush()


def before_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    d = resumestate.runtime_dir()
    if d is not None and os.environ.get(contract.RESUME_TRACE_ENV) == "1":
        _trace_row(d, optimizer)


def after_barrier() -> None:
    """Ranks usually wait at a barrier while rank 0 saves: the earliest moment to see its mark."""
    d = resumestate.runtime_dir()
    if d is not None:
        _write_marked(d)


def _write_marked(d: Path) -> None:
    """A rank that did not save writes its state of the step another rank checkpointed at."""
    marks = d / contract.RNG_DIR / contract.MARKS_DIR
    try:
        names = os.listdir(marks)
    except OSError:
        return
    for name in names:
        if name in resumestate.state["marks_seen"] or name.startswith("."):
            continue
        step_text, _, digest = name.partition(".")
        step = int(step_text) if step_text.isdigit() else -1
        if step > resumestate.state["step"]:
            continue  # this rank has not got there yet
        resumestate.state["marks_seen"].add(name)
        states = (
            rngstates.capture_states()
            if step == resumestate.state["step"]
            else resumestate.state["ring"].get(step)
        )
        target = ckptfiles.state_path(d, digest, resumestate.rank())
        if states is None or target.exists():
            continue
        body = {"path": "", "step": step, "rank": resumestate.rank(), "states": states}
        ckptfiles.durable_write(target, json.dumps(body))


def _write_trace_row(optimizer: Any) -> None:
    """The row of the step just taken, its gradients read now: an optimizer stepped with a closure
    (Lightning's) computes them inside the step, after the row's other fields were read."""
    row = resumestate.state.pop("trace_row", None)
    if row is not None:
        row["grads"] = staterecord.grads(optimizer)
        _rtrace.write(row)


def _trace_row(d: Path, optimizer: Any) -> None:
    """What decides the step about to be taken: parameters, optimizer state, LR, scheduler and sampler
    epochs, the batches taken, RNG streams (gradients once the step is taken); each parameter's and
    optimizer state tensor's ``[sum, bits]`` by its path (``optimizer.state[3].exp_avg``)."""
    tensors = staterecord.tensors_row(optimizer)
    row = {
        "step": resumestate.state["step"],
        "params": tensors["params"],
        "optimizer": tensors["optimizer"],
        "lr": [group.get("lr") for group in optimizer.param_groups],
        "scheduler": statewatch.scheduler_epochs(optimizer),
        "sampler": statewatch.sampler_epochs(),
        "dataloader": batchorder.last_batch(),
        "rng": staterecord.rng_fingerprints(),  # not the loaders' position: a resume may count it otherwise
        "state": tensors["state"],
    }
    resumestate.state["trace_row"] = row  # written once the step is taken, with its gradients
