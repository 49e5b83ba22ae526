"""`--backend slurm` where no Slurm answers, and Slurm options given to another backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.builders import toy
from tests.conftest import Cli, Project


def test_no_slurm_controller_answering_exits_3_with_a_hint(
    project: Project,
    cli: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A configuration naming a controller on a loopback port where nothing listens; where the
    # Slurm commands are not installed at all, the run stops at the same place.
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        "ClusterName=none\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\nAuthType=auth/munge\n"
        "NodeName=x NodeAddr=127.0.0.1 CPUs=1\nPartitionName=p Nodes=x Default=YES\n"
    )
    monkeypatch.setenv("SLURM_CONF", str(conf))
    r = cli("run", "--backend", "slurm", "--nodes", "2", "--", "python", "t.py", cwd=toy(project).root)
    assert r.code == 3, r.err
    assert "no Slurm" in r.err  # "no Slurm controller answers" or "no Slurm here: `scontrol` is not on PATH"
    assert "make slurm-up" in r.err and "Traceback" not in r.err
    assert json.loads(cli("ls", "--json").out)["runs"] == []


def test_slurm_options_for_another_backend_are_a_usage_error(project: Project, cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("run", "--backend", "local", "--nodes", "2", "--partition", "gpu", "t.py", cwd=toy(project).root)
    assert r.code == 2
    assert "--nodes, --partition only apply to --backend slurm" in r.err
    assert "trained" not in r.out + r.err
    r = cli("run", "--backend", "local", "--detach", "t.py")
    assert r.code == 2 and "--detach only applies to --backend slurm" in r.err


def test_export_as_slurm_writes_a_script_and_as_k8s_needs_an_image_when_the_run_had_none(
    project: Project,
    cli: Cli,
) -> None:
    root = toy(project).root
    assert cli("run", "--backend", "local", "--seed", "5", "t.py", cwd=root).code == 0
    r = cli("export", "latest", "--as", "k8s", "-o", "job.yaml")
    assert r.code == 2
    assert "ran without an image (local backend)" in r.err and "--image" in r.err
    assert not (root / "job.yaml").exists()

    r = cli("export", "latest", "--as", "slurm", "-o", "job.sbatch")
    assert r.code == 0, r.err
    text = (root / "job.sbatch").read_text()
    assert text.startswith("#!/bin/bash") and "export REPRO_SEED=5" in text
    assert "srun --kill-on-bad-exit=1 python t.py" in text

    r = cli("export", "latest", "--as", "k8s", "--image", "reg/x@sha256:" + "0" * 64, "-o", "job.yaml")
    assert r.code == 0, r.err
    assert "kind: Job" in (root / "job.yaml").read_text()
