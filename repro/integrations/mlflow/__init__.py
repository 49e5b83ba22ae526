"""MLflow: where a run's tracking store lies, which store a replay's own MLflow runs go to, and the
host-side calls that add the sealed capsule's digest, the verdict and the capsule artifact.

The run-context provider that tags every MLflow run started inside `repro run` lives in
`repro.integrations.mlflow.context`, registered through MLflow's ``mlflow.run_context_provider``
entry point (pyproject.toml): MLflow imports it while ``mlflow`` itself is importing. This module
imports ``mlflow`` only inside its functions, so loading it never starts that import halfway
(the circular import MLflow used to warn about on every run).

Stores: MLflow 3's default and recommended store is the SQL store ``sqlite:///mlflow.db``
(MLflow's ``sqlalchemy`` and ``alembic`` dependencies, in ``repro-capsule[integrations]``); the file store
(``file:./mlruns``) needs ``MLFLOW_ALLOW_FILE_STORE=true``. A store inside the project — the
database with the journal SQLite keeps beside it, or the ``mlruns`` directory — is the tracker's
bookkeeping: neither an output nor an undeclared input of the run.

A replay runs its command in a scratch copy of the project, where a relative store would be a
copy of its own, removed with it. So a replay's MLflow runs go where this host's MLflow is
configured (``MLFLOW_TRACKING_URI``, else MLflow's default where repro runs), passed to the
replay as an absolute ``MLFLOW_TRACKING_URI`` (`replay_environment`); a script that sets its own
relative URI keeps the replay's runs in the scratch copy, and the replay says so.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

TOOL = "mlflow"
RUN_ID_TAG = "repro.run_id"
URI_ENV = "MLFLOW_TRACKING_URI"
# What SQLite writes beside a database while it is open: rollback journal, write-ahead log, its index.
DATABASE_COMPANIONS = ("-journal", "-wal", "-shm")
_SQLITE = "sqlite:///"
_NAMED_SERVERS = ("databricks", "databricks-uc", "uc")  # tracking URIs that are names, not paths


def store_path(uri: str, cwd: str | os.PathLike[str]) -> str | None:
    """Where a local tracking store lies, absolute (relative paths against ``cwd``, as MLflow resolves
    them): a ``file:`` or plain-path store's directory, a ``sqlite:`` database file; None for a server."""
    if uri.startswith(_SQLITE):
        raw = unquote(uri[len(_SQLITE) :].split("?", 1)[0])
        return os.path.abspath(os.path.join(cwd, raw)) if raw and raw != ":memory:" else None
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        local = parsed.netloc in ("", "localhost")
        raw = unquote(parsed.path) if local else unquote(parsed.netloc + parsed.path)
    elif parsed.scheme == "" and uri and uri not in _NAMED_SERVERS:
        raw = uri
    else:
        return None
    return os.path.abspath(os.path.join(cwd, raw))


def absolute_uri(uri: str, cwd: str | os.PathLike[str]) -> str:
    """``uri`` with a local store's path made absolute against ``cwd``; other URIs as they are."""
    path = store_path(uri, cwd)
    if path is None:
        return uri
    return _SQLITE + path if uri.startswith(_SQLITE) else Path(path).as_uri()


def store_files(tracker: dict[str, Any]) -> list[str]:
    """The project-relative files and directories of a tracker's store inside the project."""
    return _files(tracker.get("path"), tracker)


def _files(path: Any, tracker: dict[str, Any]) -> list[str]:
    """A store's directory, or its database file with the journal SQLite keeps beside it."""
    if not path:
        return []
    database = str(tracker.get("tracking_uri") or "").startswith(_SQLITE)
    return [str(path), *(f"{path}{suffix}" for suffix in DATABASE_COMPANIONS if database)]


def host_tracking_uri(configured_only: bool = False) -> str | None:
    """The tracking URI MLflow is configured with on this host — ``MLFLOW_TRACKING_URI``, else (unless
    ``configured_only``) MLflow's default in the directory repro runs in (``sqlite:///mlflow.db`` in
    MLflow 3) — as an absolute URI; None when there is none (or MLflow is not installed here)."""
    configured = os.environ.get(URI_ENV, "").strip()
    if configured:
        return absolute_uri(configured, os.getcwd())
    if configured_only:
        return None
    try:
        import mlflow
    except ImportError:
        return None
    return absolute_uri(mlflow.get_tracking_uri(), os.getcwd())


def used_mlflow(trackers: list[dict[str, Any]]) -> bool:
    """Whether a run started MLflow runs (its record names an MLflow tracking store)."""
    return any(t.get("tool") == TOOL and t.get("tracking_uri") for t in trackers)


def replay_environment(
    trackers: list[dict[str, Any]], backend: str, foreign: bool = False
) -> tuple[dict[str, str], str | None]:
    """The variables that send a replay's MLflow runs to this host's store, and a line saying where.

    Only for a run that used MLflow, and only on a backend whose processes see the host's files
    (local): a container sees its own copy of the project, where its runs stay. For a run from
    elsewhere (`repro.sandbox`) only a store this host configured (``MLFLOW_TRACKING_URI``) is used,
    the one store repro tags such runs in (`repro.integrations.trackers`).
    """
    if not used_mlflow(trackers):
        return {}, None
    from repro.backends import registry

    if not registry.in_place(backend):
        return {}, f"mlflow: the replay's MLflow runs stay in the {backend} backend's copy of the project"
    uri = host_tracking_uri(configured_only=foreign)
    if uri is None:
        why = f"no {URI_ENV} here" if foreign else "MLflow is not installed here"
        return {}, f"mlflow: {why}; the replay's MLflow runs stay in its scratch copy"
    return {URI_ENV: uri}, f"mlflow: the replay's MLflow runs go to {uri} (this host's {URI_ENV} or default)"


def host_uri(tracking_uri: str, project_path: str | None, project_root: Path) -> str:
    """The tracking URI as the host sees it: a store inside the project (a `mlruns` directory, a
    `mlflow.db` database) maps onto the host's copy of the project."""
    if project_path is None:
        return tracking_uri
    full = (project_root / project_path).resolve()
    return _SQLITE + str(full) if tracking_uri.startswith(_SQLITE) else full.as_uri()


def outside_stores(trackers: list[dict[str, Any]]) -> list[str]:
    """Absolute paths of the local MLflow stores a run used outside its project (a replay's, in
    the host's store): what the run wrote there is MLflow's, not a file written outside the project."""
    return [f for t in trackers if t.get("tool") == TOOL for f in _files(t.get("store"), t)]


def left_in_copy(trackers: list[dict[str, Any]]) -> str | None:
    """A re-execution's MLflow runs whose store lay inside its scratch copy of the project (the
    script set a relative tracking URI itself): gone with the copy. Their ids are dropped from the
    record, so nothing looks for them again; returns a line saying so, or None."""
    gone: list[str] = []
    for tracker in trackers:
        if tracker.get("tool") == TOOL and tracker.get("path") and tracker.get("runs"):
            gone += [str(r) for r in tracker["runs"]]
            tracker["runs"] = []
    if not gone:
        return None
    return (
        f"mlflow: the replay's MLflow run(s) {', '.join(gone)} were written to a store in its scratch copy "
        f"(the script sets a relative tracking URI) and went with it; leave the URI to {URI_ENV} "
        "to keep them in your store"
    )


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


def set_tags(uri: str, run_ids: list[str], tags: dict[str, str]) -> list[str]:
    """Set tags on the MLflow runs the store holds; returns the ids it does not hold (runs a record
    made elsewhere names, whose store is another machine's).

    Raises:
        MlflowException: the tracking store cannot be read or written.
    """
    from mlflow.exceptions import MlflowException

    client = _client(uri)
    absent = []
    for run_id in run_ids:
        try:
            client.get_run(run_id)
        except MlflowException as e:
            if e.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise
            absent.append(run_id)
            continue
        for key, value in tags.items():
            client.set_tag(run_id, key, value)
    return absent


def log_artifact(uri: str, run_ids: list[str], path: Path) -> None:
    """Log a file (the exported capsule) under the runs' `repro/` artifacts.

    Raises:
        MlflowException: the tracking store cannot be written.
    """
    client = _client(uri)
    for run_id in run_ids:
        client.log_artifact(run_id, str(path), artifact_path="repro")


__all__ = [
    "absolute_uri",
    "left_in_copy",
    "outside_stores",
    "find_runs",
    "host_tracking_uri",
    "host_uri",
    "log_artifact",
    "replay_environment",
    "set_tags",
    "store_files",
    "store_path",
]
