"""Slurm options on the real local cluster: quoted paths reach sbatch whole; a forged partition never
reaches it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from repro.errors import ExitCode
from repro.store.runs import Store
from tests.conftest import Project
from tests.forging import forge
from tests.integration.test_slurm import nodes  # noqa: F401 - the fixture: skips where no cluster answers

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

TRAIN = """\
import argparse
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()
for epoch in range(args.epochs):
    print(f"epoch {epoch} loss {1.0 / (epoch + 1):.4f}")
Path("outputs").mkdir(exist_ok=True)
Path("outputs/model.txt").write_text(f"trained {args.epochs} epochs\\n")
"""


def _partition() -> str:
    out = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=20).stdout
    return next(p.rstrip("*") for p in out.split() if p.endswith("*"))


def _jobs() -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, timeout=20).stdout
    return set(out.split())


def test_a_project_path_with_a_space_and_a_hash_runs_and_a_forged_partition_is_never_submitted(
    tmp_path: Path,
    nodes: list[str],  # noqa: F811
) -> None:
    root = tmp_path / "my proj #1"  # `#SBATCH --chdir=…` unquoted would cut it at the space
    project = Project.init(root)
    project.write(".gitignore", "outputs/\n")
    project.write("train.py", TRAIN)
    project.commit("train")
    partition = _partition()
    r = project.repro("run", "--backend", "slurm", "--partition", partition, "--time", "5", "train.py")
    assert r.code == 0, r.err
    record = Store(root).load_run(Store(root).run_ids()[-1]).record
    assert record.backend.details["slurm"]["state"] == "COMPLETED"
    assert record.backend.details["slurm"]["options"]["partition"] == partition
    assert any(o.path == "outputs/model.txt" for o in record.results.outputs)

    tar = tmp_path / "slurm.tar"
    assert project.repro("export", "latest", "-o", str(tar)).code == 0
    marker = tmp_path / "injected"

    def inject(rec: dict[str, Any]) -> None:
        rec["backend"]["details"]["slurm"]["options"]["partition"] = f"{partition}\ntouch {marker}"

    evil = forge(tar, tmp_path / "evil.tar", inject)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = _jobs()
    r = project.repro("replay", str(evil), "--backend", "slurm", cwd=elsewhere)
    assert r.code == ExitCode.CAPSULE_INVALID, r.out + r.err
    assert "the recorded Slurm options: partition" in r.err and "control character" in r.err
    assert not marker.exists() and not list(elsewhere.rglob("job.sbatch")) and _jobs() <= before
