"""Lightning and the Hugging Face Trainer on CPU, for real: metrics and parameters reach the record,
the framework's own seed is recorded, and settings that override repro's mode are warned about."""

from __future__ import annotations

import pytest

from repro.store import Store
from tests.conftest import Project

pytestmark = pytest.mark.slow


def _project(project: Project, script: str) -> None:
    project.script(script, "train.py")
    project.points()
    project.write(".gitignore", "outputs/\nmodel.pt\nlightning_logs/\n")
    project.commit(script)


def test_lightning_seed_everything_and_deterministic_false_are_recorded_and_warned(project: Project) -> None:
    pytest.importorskip("lightning", reason="lightning is not installed (repro-capsule[integrations])")
    _project(project, "lightning_train.py")
    r = project.repro("run", "--backend", "local", "--seed", "5", "--data", "data", "--",
                      "python", "train.py", "--epochs", "1")  # fmt: skip
    assert r.code == 0, r.err
    record = Store(project.root).resolve("latest").record
    lightning = record.seeds.framework["lightning"]
    assert lightning == {"seed": 1337, "workers": True, "deterministic_algorithms": False}
    assert any("seed_everything=1337 after repro seeded them with 5" in w for w in record.warnings)
    assert any("Lightning set deterministic algorithms off" in w for w in record.warnings)
    assert record.results.params == {"hidden": 8, "lr": 0.05}  # save_hyperparameters, through the logger
    assert "train_loss" in record.results.final_metrics


def test_hf_trainer_seed_and_metrics_reach_the_record(project: Project) -> None:
    pytest.importorskip("transformers", reason="transformers is not installed (repro-capsule[integrations])")
    _project(project, "hf_train.py")
    r = project.repro("run", "--backend", "local", "--seed", "3", "--", "python", "train.py", "--epochs=1")
    assert r.code == 0, r.err
    record = Store(project.root).resolve("latest").record
    facts = record.seeds.framework["transformers"]
    assert facts["seed"] == 42 and facts["full_determinism"] is False and facts["deterministic_algorithms"]
    assert any("TrainingArguments.seed=42 after repro seeded them with 3" in w for w in record.warnings)
    assert record.results.params["learning_rate"] == 0.001 and record.results.params["seed"] == 42
    assert "loss" in record.results.final_metrics and "train_loss" in record.results.final_metrics
    assert any(o.path == "outputs/hf/model.safetensors" for o in record.results.outputs)
