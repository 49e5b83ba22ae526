"""Kubernetes manifests for a run: a Kubeflow PyTorchJob, or a plain batch/v1 Job on one node.

The manifests cannot be applied here; they are checked for shape only (tests parse them back).
"""

from __future__ import annotations

from typing import Any

import yaml

from repro.backends.exporters import export_env, layout, script_args
from repro.store.record import Record

PYTORCHJOB_API = "kubeflow.org/v1"
WORKDIR = "/work"  # where the image holds the project's code


def _labels(record: Record) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "repro", "repro/run": record.id}


def _meta(record: Record) -> dict[str, Any]:
    return {"name": f"repro-{record.id}".lower(), "labels": _labels(record)}


def _container(record: Record, image: str, command: list[str], name: str) -> dict[str, Any]:
    env = [{"name": k, "value": v} for k, v in export_env(record).items()]
    workdir = WORKDIR if record.command.cwd == "." else f"{WORKDIR}/{record.command.cwd}"
    return {"name": name, "image": image, "imagePullPolicy": "IfNotPresent", "command": command,
            "workingDir": workdir, "env": env}  # fmt: skip


def pytorch_job(record: Record, image: str) -> dict[str, Any]:
    """A PyTorchJob with one replica per rank (Master 1, Worker world-1), one process each.

    The operator gives every pod its node rank and the master's address; torchrun in the
    pod starts its one rank, so rank r runs in replica r and the world size is the run's.
    """
    nodes, nproc = layout(record)
    world = nodes * nproc

    def replica(count: int) -> dict[str, Any]:
        container = _container(record, image, ["torchrun", *script_args(record)], "pytorch")
        pod = {"metadata": {"labels": _labels(record)}, "spec": {"containers": [container]}}
        return {"replicas": count, "restartPolicy": "Never", "template": pod}

    replicas = {"Master": replica(1)}
    if world > 1:
        replicas["Worker"] = replica(world - 1)
    spec = {"nprocPerNode": "1", "runPolicy": {"backoffLimit": 0, "cleanPodPolicy": "None"},
            "pytorchReplicaSpecs": replicas}  # fmt: skip
    return {"apiVersion": PYTORCHJOB_API, "kind": "PyTorchJob", "metadata": _meta(record), "spec": spec}


def batch_job(record: Record, image: str) -> dict[str, Any]:
    """A batch/v1 Job: one pod; several ranks run there through `torchrun --standalone`."""
    nodes, nproc = layout(record)
    world = nodes * nproc
    args = script_args(record)
    command = (
        ["python", *args] if world == 1 else ["torchrun", "--standalone", f"--nproc-per-node={world}", *args]
    )
    pod = {"restartPolicy": "Never", "containers": [_container(record, image, command, "train")]}
    spec = {"backoffLimit": 0, "template": {"metadata": {"labels": _labels(record)}, "spec": pod}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(record), "spec": spec}


def k8s_yaml(record: Record, image: str, plain_job: bool = False) -> str:
    """The manifest as YAML: a PyTorchJob for several ranks, else (or with ``plain_job``) a Job."""
    nodes, nproc = layout(record)
    single = nodes * nproc == 1
    manifest = batch_job(record, image) if plain_job or single else pytorch_job(record, image)
    return yaml.safe_dump(manifest, sort_keys=False)
