"""MLflow: a run-context provider that tags every MLflow run started inside `repro run`, and the
host-side calls that add the sealed capsule's digest, the verdict and the capsule artifact.

Registered through MLflow's ``mlflow.run_context_provider`` entry point (pyproject.toml), so a
training script needs no change: ``mlflow.start_run()`` inside `repro run` gets the tags
``repro.run_id``, ``repro.mode`` and ``repro.seed``; once the run is sealed, repro finds those
MLflow runs by their ``repro.run_id`` tag and adds ``repro.capsule`` (the record's digest) and,
after a replay or check, ``repro.verdict``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

# Only this import at module level: MLflow loads the provider while `mlflow` itself is importing.
from mlflow.tracking.context.abstract_context import RunContextProvider

from repro.runtime import links

TOOL = "mlflow"
RUN_ID_TAG = "repro.run_id"


class ReproRunContextProvider(RunContextProvider):
    """Tags for an MLflow run started inside a repro run; notes the tracking store for the runner."""

    def in_context(self) -> bool:
        return links.active()

    def tags(self) -> dict[str, str]:
        import mlflow

        uri = mlflow.get_tracking_uri()
        path = _file_store(uri)
        links.note(TOOL, tracking_uri=uri, path=links.in_project(path) if path else None)
        return {
            RUN_ID_TAG: os.environ.get("REPRO_RUN_ID", ""),
            "repro.mode": os.environ.get("REPRO_MODE", ""),
            "repro.seed": os.environ.get("REPRO_SEED", ""),
        }


def _file_store(uri: str) -> str | None:
    """The directory of a `file:` tracking store (relative ones against the working directory)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    raw = unquote(parsed.path) if parsed.netloc in ("", "localhost") else unquote(parsed.netloc + parsed.path)
    return os.path.abspath(raw)


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def find_runs(uri: str, repro_run_id: str) -> list[str]:
    """The ids of MLflow runs tagged with this repro run id, oldest first.

    Raises:
        MlflowException: the tracking store cannot be read.
    """
    client = _client(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return []
    runs = client.search_runs(
        experiments, filter_string=f"tags.`{RUN_ID_TAG}` = '{repro_run_id}'", order_by=["start_time ASC"]
    )
    return [r.info.run_id for r in runs]


def set_tags(uri: str, run_ids: list[str], tags: dict[str, str]) -> None:
    """Set tags on MLflow runs.

    Raises:
        MlflowException: the tracking store cannot be written.
    """
    client = _client(uri)
    for run_id in run_ids:
        for key, value in tags.items():
            client.set_tag(run_id, key, value)


def log_artifact(uri: str, run_ids: list[str], path: Path) -> None:
    """Log a file (the exported capsule) under the runs' `repro/` artifacts.

    Raises:
        MlflowException: the tracking store cannot be written.
    """
    client = _client(uri)
    for run_id in run_ids:
        client.log_artifact(run_id, str(path), artifact_path="repro")


__all__ = ["ReproRunContextProvider", "find_runs", "log_artifact", "set_tags"]
