"""MLflow for real, with MLflow 3's SQL store (``sqlite:///mlflow.db``) and with the file store: every MLflow
run started inside `repro run` is linked and tagged, the store is no output, and a replay's own MLflow run
lands in the store this host is configured with, where the verdict is tagged."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from repro.store.record import Record
from repro.store.runs import Store
from tests.builders import training_project
from tests.conftest import Project, git

pytestmark = [
    pytest.mark.slow,
    # MLflow 3.17's SQL store still asks SQLAlchemy 2.1 for a loader it deprecated; a notice, not a fault.
    pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated"),
]
pytest.importorskip(
    "mlflow", reason="mlflow-skinny is not installed (pip install 'repro-capsule[integrations]')"
)
pytest.importorskip("sqlalchemy", reason="MLflow's SQL store needs sqlalchemy (repro-capsule[integrations])")

SQLITE = {"MLFLOW_TRACKING_URI": "sqlite:///mlflow.db"}
# MLflow 3 keeps the file store behind a switch; the runs and the test's client both need it.
FILE_STORE = {"MLFLOW_TRACKING_URI": "file:./mlruns", "MLFLOW_ALLOW_FILE_STORE": "true"}
# MLflow warns (never fails) when a registered context provider does not load: make that an error.
NO_PROVIDER_WARNING = {"PYTHONWARNINGS": "error::UserWarning:mlflow.tracking.context.registry"}
IGNORED = "outputs/\nmlruns/\nmlflow.db\n"  # the projects' .gitignore


def _tags(uri: str, run_id: str) -> dict[str, str]:
    from mlflow.tracking import MlflowClient

    return dict(MlflowClient(tracking_uri=uri).get_run(run_id).data.tags)


def _run_and_replay(project: Project, env: dict[str, str], store_file: str) -> tuple[Record, Record, str]:
    """Run (logging the capsule), replay; return both records and the replay's stderr."""
    env = {**env, **NO_PROVIDER_WARNING}
    r = project.repro("run", "--backend", "local", "--seed", "3", "--data", "data", "--mlflow-log-capsule",
                      "--", "python", "train.py", "--lr", "0.02", env=env)  # fmt: skip
    assert r.code == 0, r.err
    assert "Failure attempting to register" not in r.err and "circular import" not in r.err
    assert "could not" not in r.err
    store = Store(project.root)
    record = store.resolve("latest").record
    (tracker,) = record.results.trackers
    assert tracker["tool"] == "mlflow" and tracker["path"] == store_file and len(tracker["runs"]) == 1
    assert [o.path for o in record.results.outputs] == ["outputs/model.pt"]  # the store is MLflow's
    assert record.data.undeclared == [] and record.results.outputs_outside_root == []

    r = project.repro("replay", "latest", "--json", env=env)
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
    assert "could not tag" not in r.err and "not found" not in r.err
    replay = store.resolve("latest").record
    assert replay.kind == "replay" and replay.results.outputs_outside_root == [] and replay.warnings == []
    return record, replay, r.err


def test_mlflow_sqlite_store_runs_and_the_replays_run_are_tagged(project: Project) -> None:
    training_project(project, "mlflow_train.py", ignore=IGNORED, message="mlflow")
    record, replay, err = _run_and_replay(project, SQLITE, "mlflow.db")
    uri = f"sqlite:///{project.root / 'mlflow.db'}"
    assert f"the replay's MLflow runs go to {uri}" in err

    run_id = record.results.trackers[0]["runs"][0]
    tags = _tags(uri, run_id)
    sealed = Store(project.root).runs_dir / record.id / "capsule.yaml"
    digest = hashlib.sha256(sealed.read_bytes()).hexdigest()
    assert tags["repro.run_id"] == record.id and tags["repro.mode"] == "strict" and tags["repro.seed"] == "3"
    assert tags["repro.capsule"] == f"sha256:{digest}" and tags["repro.verdict"] == "identical"
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    assert client.get_run(run_id).data.params["lr"] == "0.02"
    assert [a.path for a in client.list_artifacts(run_id, "repro")] == [f"repro/{record.id}.tar"]

    # The replay's own MLflow run is in the same store, found, named and tagged.
    (tracker,) = replay.results.trackers
    assert tracker["tracking_uri"] == uri and "path" not in tracker
    (replayed,) = tracker["runs"]
    assert replayed != run_id
    replay_tags = _tags(uri, replayed)
    assert replay_tags["repro.run_id"] == replay.id and replay_tags["repro.verdict"] == "identical"


def test_mlflow_file_store_runs_and_the_replays_run_are_tagged(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # for this test's own client
    training_project(project, "mlflow_train.py", ignore=IGNORED, message="mlflow")
    record, replay, _ = _run_and_replay(project, FILE_STORE, "mlruns")
    uri = (project.root / "mlruns").as_uri()
    run_id = record.results.trackers[0]["runs"][0]
    assert _tags(uri, run_id)["repro.verdict"] == "identical"
    (replayed,) = replay.results.trackers[0]["runs"]
    assert _tags(uri, replayed)["repro.run_id"] == replay.id


def test_a_script_that_sets_a_relative_store_itself_replays_without_a_lost_run(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    training_project(project, "mlflow_train.py", ignore=IGNORED, message="mlflow")
    env = {"MLFLOW_ALLOW_FILE_STORE": "true", **NO_PROVIDER_WARNING}
    r = project.repro("run", "--backend", "local", "--seed", "3", "--data", "data", "--", "python",
                      "train.py", "--tracking-uri", "file:./mlruns", env=env)  # fmt: skip
    assert r.code == 0, r.err
    record = Store(project.root).resolve("latest").record
    (run_id,) = record.results.trackers[0]["runs"]
    r = project.repro("replay", "latest", "--json", env=env)
    assert r.code == 0, r.out + r.err
    verdict = json.loads(r.out)
    assert verdict["status"] == "identical" and "not found" not in r.err
    (note,) = [n for n in verdict["notes"] if n.startswith("mlflow:")]
    assert "written to a store in its scratch copy" in note and "MLFLOW_TRACKING_URI" in note
    replay = Store(project.root).resolve("latest").record
    assert replay.results.trackers[0]["runs"] == []  # gone with the copy: named in the note, never looked for
    assert _tags((project.root / "mlruns").as_uri(), run_id)["repro.verdict"] == "identical"


def test_a_capsule_from_elsewhere_replays_into_this_hosts_store(project: Project, tmp_path: Path) -> None:
    """A colleague replays an exported capsule in their own clone: the replay's MLflow run goes to the
    store their MLFLOW_TRACKING_URI names and is tagged there; the original's run, in the author's store,
    is named as absent, not an error."""
    training_project(project, "mlflow_train.py", ignore=IGNORED, message="mlflow")
    env = {**SQLITE, **NO_PROVIDER_WARNING}
    r = project.repro("run", "--backend", "local", "--seed", "3", "--data", "data", "train.py", env=env)
    assert r.code == 0, r.err
    (original_run,) = Store(project.root).resolve("latest").record.results.trackers[0]["runs"]
    capsule = tmp_path / "run.tar"
    assert project.repro("export", "latest", "-o", str(capsule)).code == 0
    clone = Project(tmp_path / "clone")
    git(tmp_path, "clone", "-q", str(project.root), str(clone.root))
    clone.points()  # the same data, made here
    r = clone.repro("replay", str(capsule), "--backend", "local", "--json", env=env)
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
    assert "could not tag" not in r.err
    assert f"{original_run} of " in r.err and "(recorded in another store); not tagged" in r.err
    replay = Store(clone.root).resolve("latest").record
    (replayed,) = replay.results.trackers[0]["runs"]
    tags = _tags(f"sqlite:///{clone.root / 'mlflow.db'}", replayed)
    assert tags["repro.run_id"] == replay.id and tags["repro.verdict"] == "identical"
