"""Certifying exact resume: where to kill a run, and what a resume failed to restore.

Pure functions over the resume trace the runtime writes with ``REPRO_RESUME_TRACE=1``
(``rtrace.rank<R>.jsonl``: before every optimizer step, the parameter, gradient and
optimizer-state sums, the learning rates and a fingerprint of each RNG stream). At the
first step where a resumed run's row differs from the uninterrupted run's, the first
field that differs — in the order that separates causes — names what was not restored.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from repro.runtime import contract

# (field, cause, what it means), in the order that tells causes apart: the model and the
# optimizer come straight from the checkpoint; the LR from the scheduler; the RNG streams
# from the runtime's restore; gradients that differ with all of those equal mean another batch.
CAUSES: tuple[tuple[str, str, str], ...] = (
    ("params", "model", "the model's parameters were not restored"),
    ("optimizer", "optimizer", "the optimizer state was not restored"),
    ("lr", "scheduler", "the learning-rate scheduler state was not restored"),
    ("rng.python", "rng:python", "the `random` RNG state was not restored"),
    ("rng.numpy", "rng:numpy", "NumPy's global RNG state was not restored"),
    (
        "rng.numpy_generators",
        "rng:numpy_generators",
        "a NumPy default_rng generator's state was not restored",
    ),
    (
        "rng.torch",
        "rng:torch",
        "torch's CPU RNG state was not restored (sampler order, worker seeds, dropout)",
    ),
    ("rng.cuda", "rng:cuda", "a CUDA device's RNG state was not restored"),
    ("grads", "batch", "the batch differs: the DataLoader position or sampler order was not restored"),
)


@dataclass
class ResumeCause:
    """What a resume did not restore: the first step and field where it parted from the uninterrupted run."""

    step: int
    rank: int
    cause: str  # model | optimizer | scheduler | rng:<stream> | batch
    field: str
    uninterrupted: Any
    resumed: Any
    path: str = ""  # the first tensor that differs, by its state path (params[2], optimizer.state[3].exp_avg)

    def describe(self) -> str:
        meaning = next(m for f, _, m in CAUSES if f == self.field)
        values = ""
        if not self.field.startswith("rng."):
            values = f" ({self.uninterrupted} uninterrupted, {self.resumed} resumed)"
        what = self.path or self.field
        return f"{meaning}: {what} differs at optimizer step {self.step} on rank {self.rank}{values}"


def parse(text: str) -> list[dict[str, Any]]:
    return contract.jsonl_rows(text, lambda row: isinstance(row.get("step"), int))


def _get(row: dict[str, Any], name: str) -> Any:
    head, _, rest = name.partition(".")
    value = row.get(head)
    return value.get(rest) if rest and isinstance(value, dict) else value


def first_cause(
    uninterrupted: list[dict[str, Any]], resumed: list[dict[str, Any]], rank: int
) -> ResumeCause | None:
    """The first step of the resumed trace that differs from the uninterrupted one, and why."""
    reference = {row["step"]: row for row in uninterrupted}
    for row in sorted(resumed, key=lambda r: r["step"]):
        other = reference.get(row["step"])
        if other is None:
            continue
        for name, cause, _ in CAUSES:
            a, b = _get(other, name), _get(row, name)
            if a != b:
                return _named(ResumeCause(row["step"], rank, cause, name, a, b), other, row)
    return None


def _named(cause: ResumeCause, uninterrupted: dict[str, Any], resumed: dict[str, Any]) -> ResumeCause:
    """The model or optimizer differs: the first tensor that does, by its path, with its two sums."""
    prefix = {"params": "params[", "optimizer": "optimizer."}.get(cause.field)
    ours, theirs = uninterrupted.get("state"), resumed.get("state")
    if prefix is None or not isinstance(ours, dict) or not isinstance(theirs, dict):
        return cause
    for path, value in ours.items():
        if path.startswith(prefix) and theirs.get(path) != value:
            cause.path, cause.uninterrupted, cause.resumed = path, value, theirs.get(path)
            break
    return cause


def kill_steps(checkpoints: list[int], total: int, count: int, world: int, rng: random.Random) -> list[int]:
    """``count`` optimizer steps to kill at, each at a random point after a random checkpoint.

    A kill at step S lands after the checkpoint taken at step c < S and before the next one;
    with several ranks, at least two steps after it (a rank that did not save writes its state
    of the checkpointed step up to a step later). Empty when no checkpoint precedes the end.
    """
    lead = 2 if world > 1 else 1
    saved = sorted({c for c in checkpoints if 0 < c and c + lead <= total})
    if not saved:
        return []
    chosen = []
    for _ in range(count):
        c = rng.choice(saved)
        following = [n for n in checkpoints if n > c]
        last = min([*following, total])
        chosen.append(rng.randint(c + lead, max(c + lead, last)))
    return chosen
