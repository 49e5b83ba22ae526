"""Two op streams → the first operation whose output differs, and whether its inputs already did.

The runtime's op recorder (`repro.runtime.opstream`, ``--ops``) writes one row per aten op, in the
order each process ran them. Walking two streams of the same rank side by side, the first row
whose output digests differ is the op where the runs parted: if its input digests are equal,
the op itself gave other bits for the same inputs (a nondeterministic kernel, another thread
count, another ISA); if they differ, the inputs came in already different (data, or a value the
recorder does not see, such as a Python number drawn from OS entropy, fed into the op).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from repro.compare.reasons import Code, Reason
from repro.compare.verdict import Verdict, explained
from repro.runtime import contract
from repro.store import limits

OPS_LOG = contract.STREAMS["ops"].log  # rank 0's (or the single process's) op stream in ResultInfo.logs


OpDiffKind = Literal["value", "sequence", "length"]
OpPhase = Literal["fwd", "bwd"]  # the forward or the backward pass, as the op stream says


@dataclass
class OpDifference:
    """The first op whose output differs between two op streams, with where and how much."""

    kind: OpDiffKind  # value: the outputs differ | sequence: another op ran | length: one stream ended
    index: int  # the op's position in its process's stream
    step: int  # optimizer steps completed before it
    rank: int
    op: str  # aten::add.Tensor; for sequence: the original's op
    phase: OpPhase
    module: str | None  # blocks.2.mlp.fc1
    where: str | None  # train.py:31
    node: str | None = None  # the autograd node run in the backward pass (AddmmBackward0)
    inputs_same: bool | None = None  # None where the ops themselves differ
    max_abs: float | None = None  # the largest elementwise difference, where both outputs were kept
    sum_delta: float | None = None  # |sum(original) - sum(replay)| of the first floating output
    replay_op: str | None = None  # kind sequence: what the replay ran instead

    @property
    def size(self) -> str:
        """The size of the difference, in words."""
        if self.max_abs:  # 0: equal values in other bits (a signed zero, a NaN's payload)
            return f"max abs diff {self.max_abs:.3g}"
        if self.sum_delta:
            return f"hash differs (sums differ by {self.sum_delta:.3g})"
        return "hash differs"


# A divergence these explain already: the op stream would not say more.
_EXPLAINED = (
    Code.RUN_FAILED, Code.ORIGINAL_FAILED, Code.RESUME_STARTED_OVER, Code.CONTROL_NOT_CAUGHT,
    Code.NOT_RESTORED, Code.DATA_ORDER_DIFFERS, Code.WORKER_SEEDS_DIFFER, Code.CONCURRENT_WRITE,
)  # fmt: skip


def explained_by(verdict: Verdict) -> Reason | None:
    """The reason that already explains a divergence (a failure, another data order, an output several
    processes wrote at once), if any: then no op is the first difference, and none is named."""
    return next((r for r in verdict.reasons if r.code in _EXPLAINED), None)


def would_help(verdict: Verdict) -> bool:
    """Whether `--ops` would say more about ``verdict``: a strict divergence of computed values
    (not a failure, another data order, or a file several processes wrote) with no op compared."""
    if verdict.status != "diverged" or verdict.mode != "strict" or verdict.ops_compared:
        return False
    return explained_by(verdict) is None


def parse(text: str) -> list[dict[str, Any]]:
    """The rows of an ops.jsonl text (a ``truncated`` marker row included), in order; a row of
    another shape (a capsule's stream is untrusted) is left out."""
    return contract.jsonl_rows(text, _well_formed)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _well_formed(row: dict[str, Any]) -> bool:
    """An op row with the types the comparison reads, or a ``truncated`` marker."""
    if row.get("truncated") is True:
        return True
    values = row.get("values")
    return (
        isinstance(row.get("op"), str)
        and all(_count(row[k]) for k in ("i", "step") if k in row)
        and row.get("phase", "fwd") in get_args(OpPhase)
        and all(isinstance(row.get(k), (str, type(None))) for k in ("module", "where", "node"))
        and (values is None or (isinstance(values, list) and all(_number(v) for v in values)))
        and (row.get("sum") is None or _number(row.get("sum")))
    )


def _phase(row: dict[str, Any]) -> OpPhase:
    """A row's pass (a row without one ran forward; `_well_formed` let no other value through)."""
    return "bwd" if row.get("phase") == "bwd" else "fwd"


def within(rows: list[dict[str, Any]], steps: int) -> list[dict[str, Any]]:
    """The rows of the first ``steps`` optimizer steps."""
    return [r for r in rows if int(r.get("step", 0)) < steps]


def first_difference(
    original: dict[int, list[dict[str, Any]]], replay: dict[int, list[dict[str, Any]]]
) -> OpDifference | None:
    """The earliest differing op over the ranks both sides recorded (earliest step, then lowest rank)."""
    found = [
        d
        for rank in sorted(set(original) & set(replay))
        if (d := _first_in_rank(rank, original[rank], replay[rank])) is not None
    ]
    return min(found, key=lambda d: (d.step, d.rank)) if found else None


def _first_in_rank(
    rank: int, a_rows: list[dict[str, Any]], b_rows: list[dict[str, Any]]
) -> OpDifference | None:
    for a, b in zip(a_rows, b_rows, strict=False):
        if a.get("truncated") or b.get("truncated"):
            return None  # past here one side kept nothing: no verdict either way
        if a.get("op") != b.get("op"):
            return OpDifference(
                "sequence", int(a.get("i", 0)), int(a.get("step", 0)), rank, str(a.get("op")),
                _phase(a), a.get("module"), a.get("where"), a.get("node"),
                replay_op=str(b.get("op")),
            )  # fmt: skip
        if a.get("out") == b.get("out"):
            continue
        return OpDifference(
            "value", int(a.get("i", 0)), int(a.get("step", 0)), rank, str(a["op"]),
            _phase(a), a.get("module"), a.get("where"), a.get("node"),
            inputs_same=a.get("in") == b.get("in"), max_abs=_max_abs(a, b), sum_delta=_sum_delta(a, b),
        )  # fmt: skip
    if len(a_rows) != len(b_rows):
        shorter, longer = (a_rows, b_rows) if len(a_rows) < len(b_rows) else (b_rows, a_rows)
        extra = longer[len(shorter)]
        return OpDifference(
            "length", len(shorter), int(extra.get("step", 0)), rank, str(extra.get("op")),
            _phase(extra), extra.get("module"), extra.get("where"), extra.get("node"),
        )  # fmt: skip
    return None


def _max_abs(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    va, vb = a.get("values"), b.get("values")
    if not isinstance(va, list) or not isinstance(vb, list) or len(va) != len(vb) or not va:
        return None
    return max(abs(float(x) - float(y)) for x, y in zip(va, vb, strict=True))


def _sum_delta(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    sa, sb = a.get("sum"), b.get("sum")
    if not isinstance(sa, (int, float)) or not isinstance(sb, (int, float)):
        return None
    return abs(float(sa) - float(sb))


def describe(d: OpDifference) -> str:
    """One sentence for a person."""
    where = ", ".join(
        part
        for part in (
            f"in {d.module}" if d.module else "outside any module",
            f"at {d.where}" if d.where else "",
            "backward" + (f" ({d.node})" if d.node else "") if d.phase == "bwd" else "forward",
            f"optimizer step {d.step}",
            f"rank {d.rank}" if d.rank >= 0 else "",
        )
        if part
    )
    if d.kind == "sequence":
        return f"the runs ran different ops at op #{d.index}: {d.op} vs {d.replay_op} ({where})"
    if d.kind == "length":
        return f"one op stream ends at op #{d.index}, before {d.op} ({where})"
    cause = (
        "its tensor inputs were identical: the op itself is nondeterministic here "
        "(its kernel, the thread count, or a non-tensor argument such as a Python number)"
        if d.inputs_same
        else "its inputs already differed: the data, or a value from outside the tensors, fed it"
    )
    return f"first differing op: {d.op} #{d.index} ({where}); {d.size}; {cause}"


def reason(d: OpDifference) -> Reason:
    """The verdict's reason for it (code ``op_differs``)."""
    return Reason(
        Code.OP_DIFFERS,
        describe(d),
        fields={
            "kind": d.kind, "op": d.op, "module": d.module, "where": d.where, "phase": d.phase,
            "node": d.node, "step": d.step, "rank": d.rank, "index": d.index, "inputs_same": d.inputs_same,
            "max_abs": d.max_abs, "size": d.size, "replay_op": d.replay_op,
        },
    )  # fmt: skip


def streams(logs: dict[str, str], read: Callable[[str], bytes | None]) -> dict[int, list[dict[str, Any]]]:
    """A run's op streams by rank, from its logs (``ops``, ``ops.rank1``, …); ``read`` gives a blob.
    Each is read no further than `limits.MAX_COMPARED_OPS_BYTES`: one cut there ends with a
    ``truncated`` row naming the bound (``cut``), so nothing past it is compared, and `explain` says so."""
    found: dict[int, list[dict[str, Any]]] = {}
    for name, blob in logs.items():
        rank = contract.STREAMS["ops"].log_rank(name)
        if rank is None:
            continue
        bound = limits.MAX_COMPARED_OPS_BYTES
        text, cut = limits.stream_head(read(blob), bound)
        found[rank] = parse(text) + ([{"truncated": True, "cut": bound}] if cut else [])
    return found


def _cut(streams: dict[int, list[dict[str, Any]]]) -> int | None:
    """The bound at which one of a run's op streams was cut when read, if one was."""
    for rows in streams.values():
        if rows and rows[-1].get("cut"):
            return int(rows[-1]["cut"])
    return None


def explain(
    verdict: Verdict,
    original: dict[int, list[dict[str, Any]]],
    replay: dict[int, list[dict[str, Any]]],
    steps: int,
    source: str,
    other: str = "the replay's",
) -> None:
    """Add to a divergent verdict its first differing op over the first ``steps`` optimizer steps
    (a reason ``op_differs``), or a note saying why there is none. ``source`` names where the
    original's stream came from. A divergence already explained (`explained_by`) names no op:
    the note says what explains it."""
    verdict.ops_compared = True
    cause = explained_by(verdict)
    if cause is not None:
        verdict.notes.append(f"--ops: no op is named: the divergence is already explained ({cause.message})")
        return
    found = first_difference(
        {r: within(rows, steps) for r, rows in original.items()},
        {r: within(rows, steps) for r, rows in replay.items()},
    )
    if found is not None:
        explained(verdict, reason(found))
        verdict.notes.append(f"op streams compared over {steps} optimizer step(s): {source} and {other}")
    elif (cut := _cut(original) or _cut(replay)) is not None:
        verdict.notes.append(limits.cut_note("--ops: an op stream", cut))
    elif not original or not replay:
        verdict.notes.append("--ops: no op stream was recorded (no torch op ran under the runtime)")
    else:
        verdict.notes.append(
            f"--ops: the op streams of the first {steps} optimizer step(s) are identical ({source} and "
            f"{other}): the runs part later; raise --ops-steps"
        )
