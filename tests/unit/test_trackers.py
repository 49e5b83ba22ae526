"""What the training process tells the runner about trackers and frameworks, and what the runner does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from repro.backends.base import BuiltImage, OnEvent, RunResult, RunSpec
from repro.config import Flags, resolve
from repro.integrations import trackers
from repro.run.capture import capture
from repro.run.execute import execute, select_backend
from repro.run.prepared import RunRequest
from repro.runtime import links
from repro.store.record import Record, RunWarning
from repro.store.runs import Store
from tests.conftest import Project


@pytest.fixture
def in_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    for key, value in {"REPRO_RUN_ID": "r1", "REPRO_RUNTIME_DIR": str(runtime), "REPRO_SEED": "7",
                       "REPRO_MODE": "strict", "REPRO_PROJECT_ROOT": str(tmp_path)}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WANDB_TAGS", raising=False)
    return runtime


def test_nothing_is_noted_outside_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPRO_RUN_ID", raising=False)
    monkeypatch.setenv("REPRO_RUNTIME_DIR", str(tmp_path))
    links.note("mlflow", tracking_uri="file:./mlruns")
    links.tracker_environment()
    assert list(tmp_path.iterdir()) == [] and "repro:" not in os.environ.get("WANDB_TAGS", "")


def test_notes_fold_into_the_record(in_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    links.note("mlflow", tracking_uri="file:./mlruns", path=links.in_project(tmp_path / "mlruns"))
    links.note("mlflow", tracking_uri="file:./mlruns", path="mlruns")  # a second start_run: one store
    monkeypatch.setenv("RANK", "1")
    links.note("framework", name="lightning", seed=3, warnings=["Lightning re-seeded"])
    with (in_run / "links.jsonl").open("a") as f:
        f.write("not json\n")
    record = Record(id="r1", created="now")
    trackers.fold(record, in_run)
    assert record.results.trackers == [{"tool": "mlflow", "tracking_uri": "file:./mlruns", "path": "mlruns"}]
    assert record.seeds.framework == {"lightning": {"seed": 3}}
    assert record.warnings == [RunWarning("framework_override", "Lightning re-seeded")]
    assert trackers.store_paths(record) == ["mlruns"]
    from repro.ui.records import show_text

    shown = show_text(record)
    assert "mlflow no run found (file:./mlruns)" in shown and "lightning: seed 3" in shown
    assert links.in_project("/elsewhere/mlruns") is None


def test_wandb_runs_are_found_from_the_files_wandb_wrote() -> None:
    record = Record(id="r1", created="now")
    written = {"wandb/offline-run-20261122_175139-5cqnfxf2/logs/debug.log", "wandb/debug.log",
               "sub/wandb/run-20261122_180000-abc123/files/config.yaml", "model.pt"}  # fmt: skip
    trackers.find_runs(record, written)
    assert record.results.trackers == [
        {"tool": "wandb", "path": "sub/wandb", "runs": ["abc123"], "mode": "online"},
        {"tool": "wandb", "path": "wandb", "runs": ["5cqnfxf2"], "mode": "offline"},
    ]


def test_wandb_tags_keep_the_users_own(in_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_TAGS", "baseline")
    links.tracker_environment()
    links.tracker_environment()
    assert os.environ["WANDB_TAGS"] == "baseline,repro:r1"


IMAGE = BuiltImage(
    id="sha256:" + "ab" * 32,
    tag="repro-env:test",
    base="repro-base:bookworm",
    base_id="sha256:" + "cd" * 32,
    template="cpu",
    dockerfile_text="FROM scratch\n",
    reused=True,
    build_seconds=0.0,
)


class ImageBackend:
    """A backend whose environment is an image: records the variables the command would get."""

    name = "fake-image"

    def __init__(self) -> None:
        self.env: dict[str, str] = {}

    def prepare(self, spec: RunSpec, on_event: OnEvent) -> BuiltImage | None:
        return IMAGE

    def execute(self, spec: RunSpec, on_event: OnEvent) -> RunResult:
        self.env = dict(spec.env)
        return RunResult(exit_code=0, duration_s=0.0)


def test_wandb_docker_names_the_runs_image(project: Project) -> None:
    project.write("train.py", "print('hi')\n")
    project.commit("script")
    store = Store(project.root)
    prepared = capture(RunRequest(["train.py"], project.root), resolve(project.root), store, lambda e: None)
    backend = ImageBackend()
    record = execute(prepared, backend, store, lambda e: None)
    assert backend.env["WANDB_DOCKER"] == "sha256:" + "ab" * 32
    assert record.results.trackers == []
    assert trackers.image_environment(None) == {}


class DummyTracker(trackers.Tracker):
    """A tool registered from a test: records which of its hooks each phase of a real run called."""

    tool = "dummy"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def environment(self, image: BuiltImage | None) -> dict[str, str]:
        self.calls.append("environment")
        return {}

    def fold(self, row: dict[str, Any], entries: trackers.Entries) -> None:
        self.calls.append("fold")
        entries[(self.tool, str(row["run_id"]))] = {"tool": self.tool, "runs": [row["run_id"]]}

    def from_files(self, written: set[str]) -> list[dict[str, Any]]:
        self.calls.append("from_files")
        return [{"tool": self.tool, "path": "dummy-store"}] if "dummy-store/run.log" in written else []

    def before_seal(self, record: Record, project_root: Path, note: trackers.Note, foreign: bool) -> None:
        self.calls.append("before_seal")
        note("dummy: runs found")

    def after_seal(self, record: Record, sealed: trackers.Sealed, note: trackers.Note) -> None:
        self.calls.append("after_seal")
        assert (sealed.run_dir / "capsule.yaml").is_file()


def test_a_registered_tracker_takes_part_in_every_phase(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    dummy = DummyTracker()
    monkeypatch.setattr(trackers, "TRACKERS", (*trackers.TRACKERS, dummy))
    project.write("train.py", (
        "import os\nfrom repro.runtime import links\n"
        "links.note('dummy', run_id='d1')\n"
        "os.makedirs('dummy-store', exist_ok=True)\nopen('dummy-store/run.log', 'w').write('step 1')\n"
        "open('model.txt', 'w').write('weights')\n"
    ))  # fmt: skip
    project.commit("script")
    store = Store(project.root)
    settings = resolve(project.root, Flags(backend="local"))
    prepared = capture(RunRequest(["train.py"], project.root), settings, store, lambda e: None)
    events: list[str] = []
    record = execute(
        prepared, select_backend("local", lambda e: None), store, lambda e: events.append(e.text)
    )
    assert record.results.status == "succeeded", record.results.stderr_tail
    assert dummy.calls == ["fold", "from_files", "before_seal", "after_seal"]
    assert record.results.trackers == [
        {"tool": "dummy", "runs": ["d1"]},
        {"tool": "dummy", "path": "dummy-store"},
    ]
    assert [o.path for o in record.results.outputs] == ["model.txt"]  # its store is its bookkeeping
    assert "dummy: runs found" in events


def test_tracker_trouble_is_a_notice_not_a_failure(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow", reason="mlflow-skinny is not installed (repro-capsule[integrations])")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # a closed loopback port, refused at once
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    record = Record(id="r1", created="now")
    record.results.trackers = [{"tool": "mlflow", "tracking_uri": "http://127.0.0.1:9/", "runs": ["x"]}]
    notes: list[str] = []
    trackers.report_verdict([record], "identical", project.root, notes.append)
    assert len(notes) == 1 and notes[0].startswith("mlflow: could not tag runs x with the verdict")


def test_mlflow_provider_tags_and_notes_its_store(in_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow", reason="mlflow-skinny is not installed (repro-capsule[integrations])")
    from repro.integrations.mlflow.context import ReproRunContextProvider

    monkeypatch.chdir(in_run.parent)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "file:./mlruns")
    provider = ReproRunContextProvider()
    assert provider.in_context()
    assert provider.tags() == {"repro.run_id": "r1", "repro.mode": "strict", "repro.seed": "7"}
    (row,) = [json.loads(line) for line in (in_run / "links.jsonl").read_text().splitlines()]
    assert row == {"kind": "mlflow", "tracking_uri": "file:./mlruns", "path": "mlruns"}


def test_framework_warnings_only_when_the_framework_overrides(
    in_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from repro.integrations import frameworks

    assert frameworks.seed_override("The Trainer", 7, "TrainingArguments.seed") is None  # repro's own seed
    assert frameworks.seed_override("The Trainer", None, "seed") is None
    warning = frameworks.seed_override("The Trainer", 42, "TrainingArguments.seed")
    assert warning and "TrainingArguments.seed=42 after repro seeded them with 7" in warning
    was = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        assert frameworks.mode_conflict("Lightning", "deterministic=True") is None
        torch.use_deterministic_algorithms(True, warn_only=True)
        assert "warn-only" in (frameworks.mode_conflict("Lightning", "deterministic='warn'") or "")
        torch.use_deterministic_algorithms(False)
        assert "off" in (frameworks.mode_conflict("Lightning", "deterministic=False") or "")
        monkeypatch.setenv("REPRO_MODE", "off")
        assert frameworks.mode_conflict("Lightning", "deterministic=False") is None
    finally:
        torch.use_deterministic_algorithms(was)


def test_mlflow_stores_where_mlflow_resolves_them(tmp_path: Path) -> None:
    from repro.integrations import mlflow as ml

    assert ml.store_path("sqlite:///mlflow.db", "/p") == "/p/mlflow.db"
    assert ml.store_path("sqlite:////abs/mlflow.db", "/p") == "/abs/mlflow.db"
    assert ml.store_path("file:./mlruns", "/p/sub") == "/p/sub/mlruns"
    assert ml.store_path("file:///abs/mlruns", "/p") == "/abs/mlruns"
    assert ml.store_path("mlruns", "/p") == "/p/mlruns"  # a plain path is a file store
    assert ml.store_path("http://127.0.0.1:5000", "/p") is None and ml.store_path("databricks", "/p") is None
    assert ml.absolute_uri("sqlite:///mlflow.db", "/p") == "sqlite:////p/mlflow.db"
    assert ml.absolute_uri("file:./mlruns", "/p") == "file:///p/mlruns"
    assert ml.absolute_uri("http://127.0.0.1:5000", "/p") == "http://127.0.0.1:5000"
    database = {"tool": "mlflow", "tracking_uri": "sqlite:///mlflow.db", "path": "mlflow.db"}
    assert ml.store_files(database) == ["mlflow.db", "mlflow.db-journal", "mlflow.db-wal", "mlflow.db-shm"]
    assert ml.host_uri("sqlite:///mlflow.db", "mlflow.db", tmp_path) == f"sqlite:///{tmp_path}/mlflow.db"
    assert ml.host_uri("file:./mlruns", "mlruns", tmp_path) == (tmp_path / "mlruns").as_uri()
    record = Record(id="r1", created="now")
    record.results.trackers = [database, {"tool": "wandb", "path": "wandb", "runs": ["a"]}]
    assert trackers.store_paths(record) == [
        "mlflow.db", "mlflow.db-journal", "mlflow.db-shm", "mlflow.db-wal", "wandb",
    ]  # fmt: skip


def test_a_replays_mlflow_runs_go_to_the_hosts_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from repro.integrations import mlflow as ml

    used = [{"tool": "mlflow", "tracking_uri": "sqlite:///mlflow.db", "path": "mlflow.db", "runs": ["x"]}]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")
    env, said = ml.replay_environment(used, "local")
    assert env == {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db"}  # not the scratch copy's
    assert said is not None and env["MLFLOW_TRACKING_URI"] in said
    assert ml.replay_environment([], "local") == ({}, None)  # a run without MLflow: nothing imported or set
    env, said = ml.replay_environment(used, "docker")
    assert env == {} and said is not None and "docker backend's copy" in said
    # A store the replay's script chose inside its scratch copy: gone with it, never looked for.
    replayed = [{"tool": "mlflow", "tracking_uri": "file:./mlruns", "path": "mlruns", "runs": ["a", "b"]}]
    note = ml.left_in_copy(replayed)
    assert note is not None and "a, b" in note and replayed[0]["runs"] == []
    in_host_store = [{"tool": "mlflow", "tracking_uri": "sqlite:////h/mlflow.db", "runs": ["c"]}]
    assert ml.left_in_copy(in_host_store) is None
    outside = [{"tool": "mlflow", "tracking_uri": "sqlite:////h/mlflow.db", "store": "/h/mlflow.db"}]
    assert ml.outside_stores(outside)[:2] == ["/h/mlflow.db", "/h/mlflow.db-journal"]


def test_the_host_side_loads_mlflow_without_a_circular_import(tmp_path: Path) -> None:
    """MLflow loads repro's provider while `mlflow` is importing; repro's host side importing MLflow
    first used to meet itself half-initialised, and MLflow warned on every run."""
    pytest.importorskip("mlflow", reason="mlflow-skinny is not installed (repro-capsule[integrations])")
    code = (
        "from pathlib import Path\n"
        "from repro.integrations import mlflow as ml\n"
        "print(ml.find_runs((Path.cwd() / 'mlruns').as_uri(), 'r1'))\n"
    )
    env = {**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true"}
    proc = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", code], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]" and "register context provider" not in proc.stderr
