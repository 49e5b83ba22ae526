"""MLflow with a real file store: every MLflow run started inside `repro run` is linked and tagged."""

from __future__ import annotations

import hashlib
import json

import pytest

from repro.store import Store
from tests.conftest import Project

pytestmark = pytest.mark.slow
pytest.importorskip(
    "mlflow", reason="mlflow-skinny is not installed (pip install 'repro-capsule[integrations]')"
)


# MLflow 3 keeps the file store behind this switch; the runs and the test's client both need it.
FILE_STORE = {"MLFLOW_ALLOW_FILE_STORE": "true"}


def test_mlflow_runs_carry_repro_tags_capsule_and_verdict(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    project.script("mlflow_train.py", "train.py")
    project.points()
    project.write(".gitignore", "outputs/\nmlruns/\n")
    project.commit("mlflow")
    r = project.repro("run", "--backend", "local", "--seed", "3", "--data", "data", "--mlflow-log-capsule",
                      "--", "python", "train.py", "--lr", "0.02", env=FILE_STORE)  # fmt: skip
    assert r.code == 0, r.err
    store = Store(project.root)
    record = store.resolve("latest").record
    (tracker,) = record.results.trackers
    assert tracker["tool"] == "mlflow" and tracker["path"] == "mlruns" and len(tracker["runs"]) == 1
    assert record.data.undeclared == []  # MLflow's own store is not an undeclared input

    client = MlflowClient(tracking_uri=(project.root / "mlruns").as_uri())
    run = client.get_run(tracker["runs"][0])
    tags = run.data.tags
    digest = hashlib.sha256((store.runs_dir / record.id / "capsule.yaml").read_bytes()).hexdigest()
    assert tags["repro.run_id"] == record.id and tags["repro.mode"] == "strict" and tags["repro.seed"] == "3"
    assert tags["repro.capsule"] == f"sha256:{digest}"
    assert run.data.params["lr"] == "0.02"
    artifacts = [a.path for a in client.list_artifacts(run.info.run_id, "repro")]
    assert artifacts == [f"repro/{record.id}.tar"]
    assert "repro.verdict" not in tags

    r = project.repro("replay", "latest", "--json", env=FILE_STORE)
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"
    assert client.get_run(run.info.run_id).data.tags["repro.verdict"] == "identical"
