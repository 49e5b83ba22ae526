"""The MLflow run-context provider: tags every MLflow run started inside `repro run` with
``repro.run_id``, ``repro.mode`` and ``repro.seed``, and notes its tracking store for the runner.

Registered through MLflow's ``mlflow.run_context_provider`` entry point (pyproject.toml), so a
training script needs no change. MLflow imports this module while ``mlflow`` itself is importing:
it imports only MLflow's provider base class at module level, and nothing that imports ``mlflow``.
"""

from __future__ import annotations

import os

from mlflow.tracking.context.abstract_context import RunContextProvider

from repro.integrations.mlflow import RUN_ID_TAG, TOOL, store_path
from repro.runtime import contract, links


class ReproRunContextProvider(RunContextProvider):
    """Tags for an MLflow run started inside a repro run; notes the tracking store for the runner."""

    def in_context(self) -> bool:
        return links.active()

    def tags(self) -> dict[str, str]:
        import mlflow

        uri = mlflow.get_tracking_uri()
        where: dict[str, str] = {}
        path = store_path(uri, os.getcwd())
        if path is not None:  # a local store: relative inside the project, else as this process sees it
            inside = links.in_project(path)
            where = {"path": inside} if inside is not None else {"store": path}
        links.note(TOOL, tracking_uri=uri, **where)
        return {
            RUN_ID_TAG: os.environ.get(contract.RUN_ID_ENV, ""),
            "repro.mode": os.environ.get(contract.MODE_ENV, ""),
            "repro.seed": os.environ.get(contract.SEED_ENV, ""),
        }


__all__ = ["ReproRunContextProvider"]
