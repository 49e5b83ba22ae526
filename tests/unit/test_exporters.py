"""Exports for clusters repro does not drive: parsed back and checked for shape (they cannot run here)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from repro.backends.exporters.k8s import k8s_yaml
from repro.backends.exporters.slurm import slurm_script
from repro.errors import UsageError
from repro.export import EXPORTERS, exporter
from repro.facts.determinism import plan
from repro.facts.seeds import make_seeds
from repro.store.record import ImageInfo, Record

DIGEST = "registry.example/team/train@sha256:" + "ab" * 32


def _record(nodes: int = 2, nproc: int = 1) -> Record:
    record = Record(id="20261122-120000-0abc", created="2026-11-22T12:00:00+00:00")
    record.command.argv = ["python", "train.py", "--lr", "0.1", "--name", "two words"]
    record.command.cwd = "src"
    record.command.nodes, record.command.nproc_per_node = nodes, nproc
    record.seeds = make_seeds(42, nodes * nproc)
    record.determinism = plan("strict", 1, "avx2")
    record.code.commit = "c0ffee" * 6 + "abcd"
    record.backend.name = "slurm"
    record.backend.details = {"slurm": {"options": {"partition": "gpu", "time": "01:00:00", "account": None,
                                                    "sbatch_args": ["--qos=high"]}}}  # fmt: skip
    return record


def _env(container: dict) -> dict[str, str]:  # type: ignore[type-arg]
    return {item["name"]: item["value"] for item in container["env"]}


def test_a_multi_rank_run_exports_as_a_pytorchjob_with_the_world_size_as_replicas() -> None:
    record = _record(nodes=2, nproc=2)
    (doc,) = list(yaml.safe_load_all(k8s_yaml(record, DIGEST)))
    assert doc["apiVersion"] == "kubeflow.org/v1" and doc["kind"] == "PyTorchJob"
    assert doc["metadata"]["name"] == "repro-20261122-120000-0abc"
    replicas = doc["spec"]["pytorchReplicaSpecs"]
    assert replicas["Master"]["replicas"] + replicas["Worker"]["replicas"] == 4
    assert doc["spec"]["nprocPerNode"] == "1"
    for role in ("Master", "Worker"):
        (container,) = replicas[role]["template"]["spec"]["containers"]
        assert container["image"] == DIGEST and "@sha256:" in container["image"]
        assert container["command"] == ["torchrun", "train.py", "--lr", "0.1", "--name", "two words"]
        assert container["workingDir"] == "/work/src"
        env = _env(container)
        assert env["REPRO_SEED"] == "42" and env["PYTHONHASHSEED"] == "42"
        assert env["REPRO_MODE"] == "strict" and env["OMP_NUM_THREADS"] == "1"
        assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["REPRO_REPLAY_OF"] == record.id


def test_one_process_or_a_plain_job_exports_as_a_batch_v1_job_on_one_node() -> None:
    (single,) = list(yaml.safe_load_all(k8s_yaml(_record(nodes=1, nproc=1), DIGEST)))
    assert single["apiVersion"] == "batch/v1" and single["kind"] == "Job"
    (container,) = single["spec"]["template"]["spec"]["containers"]
    assert container["command"][:2] == ["python", "train.py"] and container["image"] == DIGEST
    assert single["spec"]["template"]["spec"]["restartPolicy"] == "Never"

    (plain,) = list(yaml.safe_load_all(k8s_yaml(_record(nodes=2, nproc=1), DIGEST, plain_job=True)))
    assert plain["kind"] == "Job"
    (container,) = plain["spec"]["template"]["spec"]["containers"]
    assert container["command"][:4] == ["torchrun", "--standalone", "--nproc-per-node=2", "train.py"]
    assert _env(container)["REPRO_SEED"] == "42"


def test_the_slurm_export_is_a_batch_script_with_the_recorded_allocation_seeds_and_layout() -> None:
    record = _record(nodes=2, nproc=1)
    text = slurm_script(record)
    lines = text.splitlines()
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --partition=gpu",
                 "#SBATCH --time=01:00:00", "#SBATCH --qos=high", "export REPRO_SEED=42",
                 "export PYTHONHASHSEED=42", "export REPRO_MODE=strict", "cd src"):  # fmt: skip
        assert line in lines, line
    assert "#SBATCH --account" not in text
    assert f"recorded={record.code.commit}" in lines
    srun = next(line for line in lines if line.startswith("srun "))
    assert "--node-rank=$SLURM_NODEID" in srun and "--nnodes=2" in srun and "'two words'" in srun
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0

    one = slurm_script(_record(nodes=1, nproc=1), image=DIGEST)
    assert f"srun --kill-on-bad-exit=1 apptainer exec docker://{DIGEST} python train.py" in one
    assert subprocess.run(["bash", "-n"], input=one, text=True).returncode == 0


def test_a_run_with_its_own_image_names_it_pinned_by_id() -> None:
    from repro.export import _k8s_image

    record = _record(nodes=1)
    record.deps.image = ImageInfo(id="sha256:" + "cd" * 32, tag="repro-env:1234")
    assert _k8s_image(record, None) == "repro-env:1234@sha256:" + "cd" * 32
    assert _k8s_image(record, DIGEST) == DIGEST


def test_export_help_lists_each_exporter_and_refuses_others(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    shown = cli("export", "--help", cwd=tmp_path)
    assert shown.code == 0
    text = " ".join(shown.out.split())
    for entry in EXPORTERS:
        assert f"{entry.name}: {entry.help}" in text and f"<id>{entry.suffix}" in text
    assert "[" + "|".join(e.name for e in EXPORTERS) + "]" in text
    bad = cli("export", "latest", "--as", "zip", cwd=tmp_path)
    assert bad.code == 2 and all(repr(e.name) in bad.err for e in EXPORTERS) and "Traceback" not in bad.err


def test_exporter_names_each_entry_and_refuses_an_unknown_name() -> None:
    assert [exporter(e.name) for e in EXPORTERS] == list(EXPORTERS)
    assert len({e.name for e in EXPORTERS}) == len(EXPORTERS) and [
        e.name for e in EXPORTERS if e.capsule
    ] == ["capsule"]
    with pytest.raises(UsageError, match="no exporter called 'zip'") as refused:
        exporter("zip")
    assert refused.value.hint == "one of: capsule, slurm, k8s, k8s-job"
