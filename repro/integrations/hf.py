"""Hugging Face Trainer: a TrainerCallback that forwards logs and arguments to repro and records
the Trainer's own seed (`seed`, `data_seed`, `full_determinism`).

    from repro.integrations.hf import ReproCallback
    trainer = Trainer(model, args, train_dataset=ds, callbacks=[ReproCallback()])

`report_to="repro"` is not possible: the Trainer accepts only the integrations it ships
(`INTEGRATION_TO_CALLBACK` has no registration API), so the callback is passed directly.
The Trainer re-seeds every RNG with `TrainingArguments.seed` (42 by default) when it is
created; the record says so, with a warning, when that seed is not repro's.
"""

from __future__ import annotations

import numbers
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from repro.integrations import frameworks
from repro.runtime import api

NAME = "transformers"


class ReproCallback(TrainerCallback):
    """Metrics go to the run's metrics.jsonl, the training arguments to its params (main process)."""

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if not state.is_world_process_zero:
            return
        api.log_params(args.to_sanitized_dict())
        how = "enable_full_determinism" if args.full_determinism else "TrainingArguments.seed"
        frameworks.report(
            NAME,
            {"seed": args.seed, "data_seed": args.data_seed, "full_determinism": args.full_determinism},
            [
                frameworks.seed_override("The Trainer", args.seed, how),
                frameworks.mode_conflict("The Trainer", "full_determinism"),
            ],
        )

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not state.is_world_process_zero:
            return
        for key, value in (logs or {}).items():
            if isinstance(value, numbers.Real) and not isinstance(value, bool):
                api.log_metric(key, float(value), state.global_step)
