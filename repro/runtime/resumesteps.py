"""What exact resume does at each optimizer step: count it, keep a non-saving rank's recent states and
write the one a checkpoint was taken at, trace what decides the step, and stop or kill on request.

In a multi-process run the ranks that do not save (rank 0 usually saves alone) keep their states
of the last few optimizer steps in memory and write the one of the step the checkpoint was taken
at as soon as they see the saver's mark (``rng/marks/<step>.<sha256>``), at most a step later;
their states of the last few steps are also kept in ``rng/ring/``, where the host finds one a
kill left unwritten. For `repro check --interrupt`: with ``REPRO_RESUME_TRACE=1`` every optimizer
step appends what decides it (parameter, gradient and optimizer-state sums, learning rates, each
scheduler's ``last_epoch``, each distributed sampler's epoch, a fingerprint of the batch indices
taken last and of each RNG stream) to ``rtrace.rank<R>.jsonl``; ``REPRO_INTERRUPT_AT_STEP=N``
SIGKILLs rank 0's process group (its DataLoader workers included) right after optimizer step N.
For `repro replay --from`: ``REPRO_STOP_AFTER_STEPS=K`` ends each process K optimizer steps after
its restore.
"""

from __future__ import annotations

import hashlib
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
    statewatch,
    steptrace,
)

_rtrace = jsonl.Appender("rtrace", dumps=lambda row: json.dumps(row, default=str))
RING = 8  # optimizer steps of state a non-saving rank keeps in memory
MAX_NAMED = 1024  # tensors a trace row names by path (parameters first); the sums cover all


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
        os.killpg(os.getpgrp(), 9)  # what a preempted node does to the whole job: SIGKILL, no clean-up


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


def _fingerprint(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _grads(torch: Any, optimizer: Any) -> float:
    with torch.no_grad():
        return sum(
            float(p.grad.detach().double().sum().item())
            for group in optimizer.param_groups
            for p in group["params"]
            if p.grad is not None
        )


def _write_trace_row(optimizer: Any) -> None:
    """The row of the step just taken, its gradients read now: an optimizer stepped with a closure
    (Lightning's) computes them inside the step, after the row's other fields were read."""
    row = resumestate.state.pop("trace_row", None)
    if row is not None:
        row["grads"] = _grads(sys.modules["torch"], optimizer)
        _rtrace.write(row)


def _trace_row(d: Path, optimizer: Any) -> None:
    """What decides the step about to be taken: parameters, optimizer state, LR, scheduler and sampler
    epochs, the batches taken, RNG streams (gradients once the step is taken); each parameter's and
    optimizer state tensor's sum by its path (``optimizer.state[3].exp_avg``)."""
    torch = sys.modules["torch"]
    sums = {"params": 0.0, "grads": 0.0, "optimizer": 0.0}
    each: dict[str, float] = {}
    with torch.no_grad():
        params = [p for group in optimizer.param_groups for p in group["params"]]
        for i, p in enumerate(params):
            value = each[f"params[{i}]"] = float(p.detach().double().sum().item())
            sums["params"] += value
        for i, p in enumerate(params):  # the numbering of the optimizer's state_dict
            for key, value in optimizer.state.get(p, {}).items():
                if isinstance(value, torch.Tensor) and len(each) < MAX_NAMED:
                    total = each[f"optimizer.state[{i}].{key}"] = float(value.detach().double().sum().item())
                    sums["optimizer"] += total
                elif isinstance(value, torch.Tensor):
                    sums["optimizer"] += float(value.detach().double().sum().item())
    row = {
        "step": resumestate.state["step"],
        **sums,
        "lr": [group.get("lr") for group in optimizer.param_groups],
        "scheduler": statewatch.scheduler_epochs(optimizer),
        "sampler": statewatch.sampler_epochs(),
        "dataloader": batchorder.last_batch(),
        "rng": {
            name: _fingerprint(value)
            for name, value in sorted(rngstates.capture_states().items())
            if name != rngstates.LOADERS  # a position, which a resumed loader may count otherwise
        },
        "state": each,
    }
    resumestate.state["trace_row"] = row  # written once the step is taken, with its gradients
