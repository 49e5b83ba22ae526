"""Why a verdict is not `identical`: a machine-readable code, the facts, and one sentence.

Code decides on ``Reason.code`` and its fields, never on ``Reason.message``: the
message is for people and may be reworded. Codes, most decisive first in a verdict:

- ``run_failed`` — the replay did not succeed (fields: status, exit_code);
- ``original_failed`` — the original failed and the replay succeeded;
- ``resume_started_over`` — a resumed run loaded no checkpoint: it started over, so no resume was
  tested (fields: resumed, original);
- ``control_not_caught`` — ``check --interrupt --control``: a resume spoiled on purpose (its RNG
  states not restored, or its samplers' epoch reset) ended identical, so the check cannot detect a
  broken resume (fields: spoiled: rng | sampler);
- ``not_restored`` — a resumed run parted from the uninterrupted one at its resume point: what
  its checkpoint or the runtime did not restore, by its state path (fields: step, rank, cause, field);
- ``data_order_differs`` — a DataLoader yielded other samples: the first such batch (fields: step,
  rank, loader, epoch, kind, original, replay; loader counts from 0 by creation order);
- ``worker_seeds_differ`` — a DataLoader's workers got another base seed (fields: epoch, rank, loader,
  original, replay);
- ``trace_differs`` — the per-step fingerprint parted (fields: step, param);
- ``missing_output`` / ``extra_output`` — an output only the original / only the replay has;
- ``tensor_differs`` — tensors inside a tensor file differ (fields: tensor, max_abs);
- ``metric_differs`` — a metric value differs: in the metric series when ``path`` is None,
  else in a metric file or TensorBoard events under ``path`` (fields: name, step, original, replay);
- ``output_differs`` — an output's bytes differ and its content could not be compared;
- ``concurrent_write`` — an output that more than one process of a run wrote differs: its bytes
  depend on which process wrote last (fields: writers, ranks, pids, detail);
- ``log_differs`` — stdout differs beyond timings (fields: line, original, replay);
- ``op_differs`` — with ``--ops``: the first tensor op whose output differs between the two
  op streams, and whether its inputs were identical (fields: kind, op, module, where, phase,
  node, step, rank, index, inputs_same, max_abs, size, replay_op).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Code(StrEnum):
    """A reason's code, most decisive first (the order a verdict lists its reasons in)."""

    RUN_FAILED = "run_failed"
    ORIGINAL_FAILED = "original_failed"
    RESUME_STARTED_OVER = "resume_started_over"
    CONTROL_NOT_CAUGHT = "control_not_caught"
    NOT_RESTORED = "not_restored"
    DATA_ORDER_DIFFERS = "data_order_differs"  # a replay whose data order differs says so first
    WORKER_SEEDS_DIFFER = "worker_seeds_differ"
    TRACE_DIFFERS = "trace_differs"
    MISSING_OUTPUT = "missing_output"
    EXTRA_OUTPUT = "extra_output"
    TENSOR_DIFFERS = "tensor_differs"
    METRIC_DIFFERS = "metric_differs"
    OUTPUT_DIFFERS = "output_differs"
    CONCURRENT_WRITE = "concurrent_write"
    LOG_DIFFERS = "log_differs"
    OP_DIFFERS = "op_differs"


CODES: tuple[Code, ...] = tuple(Code)
# Codes about one output file (``Reason.path`` names it).
OUTPUT_CODES = (
    Code.MISSING_OUTPUT,
    Code.EXTRA_OUTPUT,
    Code.TENSOR_DIFFERS,
    Code.OUTPUT_DIFFERS,
    Code.CONCURRENT_WRITE,
)


@dataclass
class Reason:
    """One reason a verdict is not identical: a `Code`, the output it is about, facts."""

    code: Code
    message: str
    path: str | None = None  # the output (file, or TensorBoard directory) it is about
    fields: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message

    def about_output(self, path: str) -> bool:
        """Whether this reason is about the output ``path``."""
        return self.path == path and (self.code in OUTPUT_CODES or self.code == Code.METRIC_DIFFERS)
