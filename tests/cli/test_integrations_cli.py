"""Integration options through the CLI: torchrun command lines repro cannot run, the MLflow flag."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "argv, message",
    [
        (["torchrun", "--nnodes", "2", "train.py"], "repro runs one node here"),
        (["torchrun", "--nproc-per-node", "auto", "train.py"], "needs a number of processes"),
        (["torchrun", "--max-jobs", "3", "train.py"], "not understood by repro"),
    ],
)
def test_a_torchrun_line_repro_cannot_run_is_a_usage_error(  # type: ignore[no-untyped-def]
    project, cli, argv, message
) -> None:
    project.write("train.py", "print('never runs')\n")
    project.commit("script")
    r = cli("run", "--backend", "local", "--", *argv, cwd=project.root)
    assert r.code == 2
    assert message in r.err and "hint:" in r.err and "Traceback" not in r.err
    runs = project.root / ".repro" / "runs"
    assert not runs.is_dir() or not list(runs.iterdir())  # refused before anything is recorded


def test_disagreeing_process_counts_are_refused(project, cli) -> None:  # type: ignore[no-untyped-def]
    project.write("train.py", "print('never runs')\n")
    project.commit("script")
    r = cli("run", "--backend", "local", "--nproc-per-node", "3", "--",
            "torchrun", "--nproc-per-node", "2", "train.py", cwd=project.root)  # fmt: skip
    assert r.code == 2 and "disagree" in r.err


def test_run_help_names_the_integration_forms(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("run", "--help")
    assert r.code == 0
    for text in ("--mlflow-log-capsule", "torchrun --nproc-per-node 2", "Hydra multirun"):
        assert text in r.out


def test_mlflow_log_capsule_is_a_setting(project, cli) -> None:  # type: ignore[no-untyped-def]
    from repro.config import resolve

    project.write("repro.yaml", "mlflow:\n  log_capsule: true\n")
    assert resolve(project.root).settings.mlflow_log_capsule is True
    project.write("repro.yaml", "mlflow:\n  log_capsul: true\n")
    r = cli("run", "--backend", "local", "--", "python", "train.py", cwd=project.root)
    assert r.code == 2 and "mlflow.log_capsule" in r.err
