"""Certifying exact resume: where to kill a run, and what a resume failed to restore.

Pure functions over the resume trace the runtime writes with ``REPRO_RESUME_TRACE=1``
(``rtrace.rank<R>.jsonl``: before every optimizer step, the parameter, gradient and
optimizer-state fingerprints, ``[sum, bits]``, each tensor's too; the learning rates, each
scheduler's ``last_epoch``, each distributed sampler's epoch, a fingerprint of the batch
indices the DataLoaders took last and of each RNG stream). At the first step where a resumed
run's row differs from the uninterrupted run's, the first field that differs — in the order
that separates causes — names what was not restored, by
its state path (``rank 1: optimizer.state[3].exp_avg``, ``sampler.epoch 2 vs 1``).
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from typing import Any

from repro.runtime import contract

# (field, cause, what it means), in the order that tells causes apart: the model and the
# optimizer come straight from the checkpoint; the scheduler's count and LR from the scheduler; a
# sampler's epoch from the script's `set_epoch`; the RNG streams from the runtime's restore; the
# batches the loader took from all of those and its position; gradients that differ with all of
# those equal mean another batch.
CAUSES: tuple[tuple[str, str, str], ...] = (
    ("params", "model", "the model's parameters were not restored"),
    ("optimizer", "optimizer", "the optimizer state was not restored"),
    ("scheduler", "scheduler", "the learning-rate scheduler state was not restored"),
    ("lr", "scheduler", "the learning-rate scheduler state was not restored"),
    ("sampler", "sampler", "the sampler's epoch was not restored (DistributedSampler.set_epoch)"),
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
    ("dataloader", "dataloader", "the DataLoader's position or order was not restored"),
    ("grads", "batch", "the batch differs: the DataLoader position or sampler order was not restored"),
)


_NAMES = {"scheduler": "scheduler{} last_epoch", "sampler": "sampler{}.epoch", "lr": "lr{}"}


def _pair(a: Any, b: Any) -> tuple[str, Any, Any]:
    """The first entry of two lists that differs, by index (none when one value only)."""
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return (f"[{i}]" if max(len(a), len(b)) > 1 else ""), x, y
        return "", len(a), len(b)
    return "", a, b


def _shown(value: Any) -> Any:
    """A tensor's value as people read it: its sum (of ``[sum, bits]``)."""
    return value[0] if isinstance(value, list) and value else value


@dataclass
class ResumeCause:
    """What a resume did not restore: the first step and field where it parted from the uninterrupted run."""

    step: int
    rank: int
    cause: str  # model | optimizer | scheduler | sampler | rng:<stream> | dataloader | batch
    field: str
    uninterrupted: Any
    resumed: Any
    path: str = ""  # the first tensor that differs, by its state path (params[2], optimizer.state[3].exp_avg)

    def state_path(self) -> str:
        """The state that differs by its path, with its two values: ``sampler.epoch 2 vs 1``."""
        if self.field.startswith("rng."):
            return f"{self.field} differs"
        if self.field == "dataloader":
            return "dataloader: next batch indices differ"
        if self.field in ("scheduler", "sampler", "lr"):
            index, a, b = _pair(self.uninterrupted, self.resumed)
            name = _NAMES[self.field]
            return f"{name.format(index)} {a} vs {b}"
        what = self.path or self.field
        a, b = _shown(self.uninterrupted), _shown(self.resumed)
        return f"{what} differs (sum {a} vs {b})" if a != b else f"{what} differs (same sum {a}, other bits)"

    def named(self) -> str:
        """``rank 1: optimizer.state[3].exp_avg differs (sum 1.0 vs 1.5)``."""
        return f"rank {self.rank}: {self.state_path()}"

    def describe(self) -> str:
        meaning = next(m for f, _, m in CAUSES if f == self.field)
        return f"{self.named()} at optimizer step {self.step} — {meaning}"


def parse(text: str) -> list[dict[str, Any]]:
    """The rows of one trace, in order, each row's tensors as ``{state path: [sum, bits]}``."""
    rows = contract.jsonl_rows(text, lambda row: isinstance(row.get("step"), int))
    paths: list[str] = []
    for row in rows:
        state = row.get("state")
        if isinstance(state, dict) and isinstance(state.get("sums"), str):
            paths = state["paths"] if isinstance(state.get("paths"), list) else paths
            row["state"] = _tensor_values(paths, state)
    return rows


def _tensor_values(paths: list[str], state: dict[str, Any]) -> dict[str, list[float | int]]:
    """A row's tensors by their state paths, from the bytes the runtime wrote (float64 sums, uint64 bits)."""
    try:
        sums, bits = bytes.fromhex(state["sums"]), bytes.fromhex(state.get("bits", ""))
        n = min(len(paths), len(sums) // 8, len(bits) // 8)
        values = zip(
            struct.unpack(f"<{n}d", sums[: 8 * n]), struct.unpack(f"<{n}Q", bits[: 8 * n]), strict=True
        )
    except (TypeError, ValueError, struct.error):
        return {}
    return {path: [total, word] for path, (total, word) in zip(paths, values, strict=False)}


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


@dataclass
class RankState:
    """One rank's state at the resume point and after: the steps compared, the first difference."""

    rank: int
    steps: int  # optimizer steps of the resumed run compared with the uninterrupted run's
    first: ResumeCause | None = None

    def text(self) -> str:
        if self.first is not None:
            return f"{self.first.named()} at optimizer step {self.first.step}"
        if not self.steps:
            return f"rank {self.rank}: no optimizer step to compare"
        return f"rank {self.rank}: same state at {self.steps} optimizer step(s) from the resume point"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"rank": self.rank, "steps": self.steps, "same": self.first is None}
        if self.first is not None:
            f = self.first
            data.update(step=f.step, cause=f.cause, path=f.state_path(), field=f.field)
        data["text"] = self.text()
        return data


def compare_ranks(
    uninterrupted: dict[int, list[dict[str, Any]]], resumed: dict[int, list[dict[str, Any]]]
) -> list[RankState]:
    """Each rank's resumed trace against the uninterrupted one's, step by step: the whole state compared."""
    states = []
    for rank in sorted(set(uninterrupted) | set(resumed)):
        reference, ours = uninterrupted.get(rank, []), resumed.get(rank, [])
        steps = {row["step"] for row in reference} & {row["step"] for row in ours}
        states.append(RankState(rank, len(steps), first_cause(reference, ours, rank)))
    return states


@dataclass
class ResumeComparison:
    """One resumed run of a check, every rank's state compared with the uninterrupted run's."""

    run: str
    step: int  # the optimizer step it was killed after
    control: str  # "" for an ordinary resume; else what its resume spoiled (rng | sampler)
    ranks: list[RankState]

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "killed_after": self.step, "control": self.control or None,
                "ranks": [r.to_dict() for r in self.ranks]}  # fmt: skip


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
