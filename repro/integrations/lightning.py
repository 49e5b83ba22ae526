"""Lightning: a Logger that forwards metrics and hyper-parameters to repro, and a Callback that
records Lightning's own seed (`seed_everything`) and determinism setting.

    from repro.integrations.lightning import ReproCallback, ReproLogger
    trainer = L.Trainer(logger=ReproLogger(), callbacks=[ReproCallback()])

`seed_everything(n)` re-seeds after repro and `Trainer(deterministic=False)` turns torch's
deterministic algorithms off; both are recorded, with a warning, when they override repro.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities import rank_zero_only

from repro.facts.command import flatten_config
from repro.integrations import frameworks
from repro.runtime import api

NAME = "lightning"


class ReproLogger(Logger):
    """Metrics go to the run's metrics.jsonl, hyper-parameters to its params (rank 0).

    It keeps no files of its own, so it gives Lightning no directory: a `ModelCheckpoint`
    without `dirpath` writes to `<default_root_dir>/checkpoints/`, as with no logger. Name
    and version are empty, never the run id: where a run writes, and what its progress bar
    prints (`v_num`), is the same in the run, its replay and its resume.
    """

    @property
    def name(self) -> str:
        return ""

    @property
    def version(self) -> str:
        return ""

    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | argparse.Namespace, *args: Any, **kwargs: Any) -> None:
        if isinstance(params, argparse.Namespace):
            params = vars(params)
        api.log_params(flatten_config(dict(params)))

    @rank_zero_only
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        for key, value in metrics.items():
            api.log_metric(key, float(value), step)


class ReproCallback(Callback):
    """Records Lightning's seed and workers flag, and warns when Lightning overrides repro's mode."""

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        raw = os.environ.get("PL_GLOBAL_SEED")
        seed = int(raw) if raw and raw.lstrip("-").isdigit() else None
        workers = os.environ.get("PL_SEED_WORKERS") == "1"
        frameworks.report(
            NAME,
            {"seed": seed, "workers": workers},
            [
                frameworks.seed_override("Lightning", seed, "seed_everything"),
                frameworks.mode_conflict("Lightning", "Trainer(deterministic=...)"),
            ],
        )
