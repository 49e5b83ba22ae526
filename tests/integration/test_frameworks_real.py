"""Lightning and the Hugging Face Trainer on CPU, for real: metrics and parameters reach the record,
the framework's own seed is recorded, and settings that override repro's mode are warned about."""

from __future__ import annotations

import json

import pytest

from repro.store.runs import Store
from tests.builders import training_project
from tests.conftest import Project

pytestmark = pytest.mark.slow
IGNORED = "outputs/\nmodel.pt\nlightning_logs/\n"  # the projects' .gitignore


def test_lightning_seed_everything_and_deterministic_false_are_recorded_and_warned(project: Project) -> None:
    pytest.importorskip("lightning", reason="lightning is not installed (repro-capsule[integrations])")
    training_project(project, "lightning_train.py", ignore=IGNORED, message="lightning_train.py")
    r = project.repro("run", "--backend", "local", "--seed", "5", "--data", "data", "--",
                      "python", "train.py", "--epochs", "1")  # fmt: skip
    assert r.code == 0, r.err
    record = Store(project.root).resolve("latest").record
    lightning = record.seeds.framework["lightning"]
    assert lightning == {"seed": 1337, "workers": True, "deterministic_algorithms": False}
    assert any("seed_everything=1337 after repro seeded them with 5" in w.message for w in record.warnings)
    assert any("Lightning set deterministic algorithms off" in w.message for w in record.warnings)
    assert record.results.params == {"hidden": 8, "lr": 0.05}  # save_hyperparameters, through the logger
    assert "train_loss" in record.results.final_metrics


def test_lightning_with_repro_logger_and_model_checkpoint_replays_identical(project: Project) -> None:
    pytest.importorskip("lightning", reason="lightning is not installed (repro-capsule[integrations])")
    project.script("lightning_logged.py", "train.py")
    project.points()
    project.write(".gitignore", "checkpoints/\n")
    project.commit("lightning")
    r = project.repro("run", "--backend", "local", "--seed", "5", "--data", "data", "train.py")
    assert r.code == 0, r.err
    record = Store(project.root).resolve("latest").record
    ckpts = sorted(o.path for o in record.results.outputs)
    assert len(ckpts) == 3 and "checkpoints/last.ckpt" in ckpts
    assert all(p.startswith("checkpoints/epoch=") for p in ckpts if p != "checkpoints/last.ckpt")
    assert not (project.root / "repro").exists()  # no folder named after the run
    assert "v_num" not in r.err  # the progress bar shows no run id
    assert {"train_loss", "val_loss"} <= set(record.results.final_metrics)
    assert record.results.params == {"hidden": 16, "lr": 0.05}

    r = project.repro("replay", "latest", "--json")
    assert r.code == 0, r.out + r.err
    verdict = json.loads(r.out)
    assert verdict["status"] == "identical", verdict["reasons"]
    by_path = {o["path"]: o for o in verdict["outputs"]}
    assert sorted(by_path) == ckpts
    best = by_path[ckpts[0]]
    # Lightning saves its dirpath and best_model_path absolute: a replay in another directory writes
    # other bytes, which compare equal once read relative to each run's root.
    assert best["status"] == "same" and best["original_hash"] != best["replay_hash"]
    assert best["tensors"]["rooted"] > 0 and not best["tensors"]["differing"]


def test_hf_trainer_seed_and_metrics_reach_the_record(project: Project) -> None:
    pytest.importorskip("transformers", reason="transformers is not installed (repro-capsule[integrations])")
    training_project(project, "hf_train.py", ignore=IGNORED, message="hf_train.py")
    r = project.repro("run", "--backend", "local", "--seed", "3", "--", "python", "train.py", "--epochs=1")
    assert r.code == 0, r.err
    record = Store(project.root).resolve("latest").record
    facts = record.seeds.framework["transformers"]
    assert facts["seed"] == 42 and facts["full_determinism"] is False and facts["deterministic_algorithms"]
    said = [w.message for w in record.warnings if w.code == "framework_override"]
    assert any("TrainingArguments.seed=42 after repro seeded them with 3" in m for m in said)
    assert record.results.params["learning_rate"] == 0.001 and record.results.params["seed"] == 42
    assert "loss" in record.results.final_metrics and "train_loss" in record.results.final_metrics
    assert any(o.path == "outputs/hf/model.safetensors" for o in record.results.outputs)
