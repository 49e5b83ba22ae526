"""Secrets planted where real projects leak them (`secret_plant`: 64 values in the environment, argv,
Hydra overrides, config files of every layout, key files under other names and sizes, printed logs,
logged params and metric names), run for real; the store, the export, and on the docker backend the
image's labels and history must hold none of them, byte for byte. An ordinary training command must
be recorded as typed and replay.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from repro.errors import ExitCode
from repro.store.runs import Store
from tests.conftest import Project
from tests.integration import secret_plant as plant


def _plant(project: Project, outside: Path, docker: bool = False) -> dict[str, str]:
    """The project with every file-borne secret in place; returns the environment to run with."""
    project.script("secret_train.py", "train.py")
    project.write(".env", plant.ENV_FILE_COMMITTED)
    project.write("helpers.py", "HUB = None\n")
    if docker:
        project.lock_torch()
    project.commit("train")
    for rel, text in {**plant.CONFIGS, **plant.KEY_FILES, **plant.NAMED_FILES}.items():
        project.write(rel, text)
    project.write(*plant.CODE_CONFIG)
    project.write(".env", plant.ENV_FILE_NEW)
    project.write("helpers.py", plant.HELPER_NEW)
    outside.mkdir()
    (outside / "secret.txt").write_text(plant.PRINTED_SECRET + "\n")
    (outside / "jwt.txt").write_text(plant.PRINTED_JWT + "\n")
    return {**plant.ENV, "EXTRA_SETTINGS": str(outside)}


def _check_record(project: Project) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(project.repro("show", "latest", "--json").out)
    argv = record["command"]["argv"]
    assert argv[argv.index("-p") + 1] == "3" and argv[argv.index("--pos-weight") + 1] == "2.0"
    excluded = set(record["code"]["excluded"])
    assert set(plant.KEY_FILES) | set(plant.NAMED_FILES) | {".env"} <= excluded
    warning = next(w["message"] for w in record["warnings"] if w["code"] == "secret_files_excluded")
    assert "notes/deploy.txt (a private key)" in warning
    assert "gcp/account.txt (a cloud service-account file)" in warning
    params = record["results"]["params"]
    assert params["lr"] == 0.1 and params["patience"] == 3 and params["api_key"] == "***"
    assert params["credentials"] == {"user": "***", "pass": "***"}
    command = record["command"]["params"]
    assert command["pos_weight"] == 2.0 and command["p"] == 3 and command["db.password"] == "***"
    return record


def test_planted_secrets_leak_nowhere(project: Project, tmp_path: Path) -> None:
    assert len(plant.PLANTED) >= 40
    env = _plant(project, tmp_path / "outside")
    run = project.repro("run", "--backend", "local", "--", "python", "train.py", *plant.ARGV, env=env)
    assert run.code == 0, run.err
    notice = next(line for line in run.err.splitlines() if "recorded as ***" in line)
    for name in ("--api-key", "--token", "--password", "db.password", "+api.token", "--db", "-k"):
        assert name in notice, notice
    assert "-p," not in notice and "--pos-weight" not in notice
    tar = tmp_path / "export" / "run.tar"
    assert project.repro("export", "latest", "-o", str(tar)).code == 0

    assert plant.leaks(tar.parent, plant.PLANTED) == {}
    assert plant.leaks(project.root / ".repro", plant.PLANTED) == {}
    assert (project.root / "model.pt").is_file() and (project.root / "checkpoints" / "last.pt").is_file()

    record = _check_record(project)
    stdout = Store(project.root).read_blob(record["results"]["logs"]["stdout"])
    logs = (stdout or b"").decode()
    assert "epoch 1 loss" in logs and "postgresql://trainer:***@db.internal" in logs
    assert "hooks.slack.com/services/***" in logs and "AccountKey=***" in logs
    show = project.repro("show", "latest")
    assert "masked in the logs" in show.out and "logged params" in show.out and "config file" in show.out
    assert any(".env" in w["message"] and w["code"] == "secret_changes_excluded" for w in record["warnings"])

    replay = project.repro("replay", "latest")
    assert replay.code == ExitCode.USAGE, replay.out + replay.err
    assert "--api-key" in replay.err and "db.password" in replay.err and "environment variables" in replay.err


def test_an_ordinary_training_command_is_recorded_as_typed_and_replays(project: Project) -> None:
    project.script("ordinary_train.py", "train.py")
    project.commit("train")
    run = project.repro("run", "--backend", "local", "--", "python", "train.py", *plant.ORDINARY)
    assert run.code == 0, run.err
    assert "***" not in run.err
    record = json.loads(project.repro("show", "latest", "--json").out)
    assert record["command"]["argv"] == ["python", "train.py", *plant.ORDINARY]
    assert not [r for r in record["redactions"] if r.startswith("argv")]
    params = record["command"]["params"]
    assert params["p"] == 3 and params["key_dim"] == 64 and params["csv_img_key"] == "filepath"
    assert params["pad_token"] == "<pad>" and params["optim.token_budget"] == 4096 and params["k"] == 5
    assert record["results"]["params"] == {"patience": 3, "tokenizer": "gpt2", "wandb_project": "acme-vision"}
    replay = project.repro("replay", "latest", "--json")
    assert replay.code == 0, replay.out + replay.err
    assert json.loads(replay.out)["status"] == "identical"


_IN_PROCESS = """
import os, sys
import repro

with repro.capture(outputs=["outputs"], seed=3) as run:
    repro.log_params(api_key=sys.argv[2], lr=0.01, db_url=os.environ["DATABASE_URL"],
                     hook=os.environ["SLACK_WEBHOOK_URL"],
                     nested={"token": os.environ["NESTED_VALUE"], "depth": 2})
    repro.log_metric("loss/" + os.environ["HF_TOKEN"], 0.25, step=0)
    os.makedirs("outputs", exist_ok=True)
    open("outputs/result.txt", "w").write("ok\\n")
print(run.id)
"""


def test_in_process_capture_masks_like_repro_run(project: Project, tmp_path: Path) -> None:
    project.write("notebook_job.py", _IN_PROCESS)
    project.write("conf/train.yaml", plant.CONFIGS["conf/train.yaml"])
    project.write("tools/ci_key.txt", plant.PUTTY)
    project.commit("job")
    api_key = "inproc-" + "Zq8" * 6
    argv = [sys.executable, "notebook_job.py", "--api-key", api_key, "--config", "conf/train.yaml"]
    env = {**os.environ, **plant.ENV, "NESTED_VALUE": "nested-tok-0001"}
    done = subprocess.run(argv, cwd=project.root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    values = [
        api_key,
        plant.HF,
        plant.DB_URL_PASS,
        plant.SLACK_HOOK,
        "nested-tok-0001",
        plant.YAML_PW,
        plant.PUTTY_LINE,
    ]
    assert plant.leaks(project.root / ".repro", values) == {}
    record = json.loads(project.repro("show", "latest", "--json").out)
    params = record["results"]["params"]
    assert (
        params["api_key"] == "***"
        and params["lr"] == 0.01
        and params["nested"] == {"token": "***", "depth": 2}
    )
    assert params["db_url"] == "postgresql://trainer:***@db.internal:5432/runs"
    assert list(record["results"]["final_metrics"]) == ["loss/***"]
    assert "--api-key" in record["command"]["argv"] and api_key not in record["command"]["argv"]
    assert "tools/ci_key.txt" in record["code"]["excluded"]
    tar = tmp_path / "export" / "job.tar"
    assert project.repro("export", record["id"], "-o", str(tar)).code == 0
    assert plant.leaks(tar.parent, values) == {}


def _docker_ready() -> bool:
    try:
        from repro.backends.docker.engine import engine_available

        return engine_available()
    except ImportError:
        return False


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.skipif(not _docker_ready(), reason="no Docker engine answers (make docker-up starts one)")
def test_planted_secrets_leak_nowhere_on_the_docker_backend(project: Project, tmp_path: Path) -> None:
    env = _plant(project, tmp_path / "outside", docker=True)
    run = project.repro("run", "--backend", "docker", "--", "python", "train.py", *plant.ARGV, env=env)
    assert run.code == 0, run.err
    tar = tmp_path / "export" / "run.tar"
    assert project.repro("export", "latest", "-o", str(tar), "--with-image").code == 0
    assert plant.leaks(tar.parent, plant.PLANTED) == {}
    assert plant.leaks(project.root / ".repro", plant.PLANTED) == {}
    record = _check_record(project)
    image = record["deps"]["image"]["id"]
    history = subprocess.run(
        ["docker", "history", "--no-trunc", image], capture_output=True, text=True, check=True
    )
    inspect = subprocess.run(
        ["docker", "image", "inspect", image], capture_output=True, text=True, check=True
    )
    labels = json.loads(inspect.stdout)[0]["Config"]["Labels"]
    assert labels and history.stdout.strip()
    for text in (history.stdout, inspect.stdout):
        assert [v for v in plant.PLANTED if v in text] == []


HYDRA_CONFIG = """\
defaults:
  - db: prod
  - _self_
model:
  hidden: 8
optim:
  lr: 0.05
epochs: 1
batch_size: 16
data: data/points.csv
save: model.pt
"""


@pytest.mark.slow
def test_a_hydra_app_keeps_credential_overrides_out_of_its_own_files(
    project: Project, tmp_path: Path
) -> None:
    pytest.importorskip(
        "hydra", reason="hydra-core is not installed (pip install 'repro-capsule[integrations]')"
    )
    project.script("hydra_train.py", "train.py")
    project.write("conf/config.yaml", HYDRA_CONFIG)
    project.write(*plant.CODE_CONFIG)  # the `db` group: `password: …` in a file no argument names
    project.write(".gitignore", "outputs/\n")
    project.points()
    project.commit("hydra app")
    overrides = [f"db.password={plant.HYDRA_DB}", f"+api.token={plant.HYDRA_API}", "optim.lr=0.1"]
    run = project.repro("run", "--backend", "local", "--data", "data", "--", "python", "train.py", *overrides)
    assert run.code == 0, run.err
    values = [plant.HYDRA_DB, plant.HYDRA_API, plant.GROUP_PASSWORD]
    assert plant.leaks(project.root / ".repro", values) == {}
    record = Store(project.root).resolve("latest").record
    params = record.command.params
    assert params["db.password"] == "***" and params["api.token"] == "***" and params["optim.lr"] == 0.1
    assert params["db.host"] == "db.prod.internal" and params["model.hidden"] == 8  # the composed config
    composed = next(k for k in record.results.logs if k.endswith("/.hydra/config.yaml"))
    text = (Store(project.root).read_blob(record.results.logs[composed]) or b"").decode()
    assert "password: '***'" in text or "password: ***" in text
    tar = tmp_path / "export" / "hydra.tar"
    assert project.repro("export", "latest", "-o", str(tar)).code == 0
    assert plant.leaks(tar.parent, values) == {}
