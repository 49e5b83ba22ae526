"""GPU mode and multi-process plumbing, without a GPU: env, knobs, devices, launch, replay notes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from repro.backends import local
from repro.backends.base import BuiltImage, RunSpec, launch_argv, runtime_source
from repro.config import Layer, Plan, Rank
from repro.errors import BackendUnavailable
from repro.facts.determinism import NCCL_PINS, plan
from repro.rerun.execute import describe_gpus, gpu_hardware_note, uses_gpu
from repro.run.collect_env import _merge_process_env
from repro.run.collect_ranks import _rank_logs, failed_rank
from repro.store.record import EnvInfo, Record

H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory": "81559 MiB"}
A100 = {"index": 0, "name": "NVIDIA A100-SXM4-80GB", "memory": "81920 MiB"}


def _env(gpus: list[dict[str, Any]], driver: str | None = "550.54.15", cuda: str | None = "12.4") -> EnvInfo:
    return EnvInfo(gpus=[dict(g, index=i) for i, g in enumerate(gpus)], driver=driver, cuda=cuda)


# --------------------------------------------------------------------------- mode


def test_gpu_mode_sets_every_documented_knob_before_the_interpreter_starts() -> None:
    info = plan("gpu", 1, "avx2")
    env = info.env
    assert env["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert env["NVIDIA_TF32_OVERRIDE"] == "0"
    assert env["NCCL_ALGO"] == "Ring" and env["NCCL_PROTO"] == "Simple" and env["NCCL_NVLS_ENABLE"] == "0"
    assert env["NCCL_MIN_NCHANNELS"] == env["NCCL_MAX_NCHANNELS"]
    assert "CUDA_VISIBLE_DEVICES" not in env  # GPUs stay visible; strict mode hides them
    assert info.knobs["deterministic_algorithms"] and info.knobs["cudnn_deterministic"]
    assert info.knobs["cudnn_benchmark"] is False and info.knobs["tf32"] is False
    assert info.knobs["nccl"] == NCCL_PINS and info.knobs["cublas_workspace"] == ":4096:8"


def test_gpus_choose_gpu_mode_and_strict_mode_hides_them() -> None:
    assert Plan((), gpus="1").mode == "gpu" and Plan(()).mode == "strict"
    assert Plan((Layer(Rank.FLAG, {"mode": ("off", "--mode")}),), gpus="all").mode == "off"
    assert plan("strict", 1, None).env["CUDA_VISIBLE_DEVICES"] == ""
    assert "NCCL_ALGO" not in plan("off", 1, None).env


def _pythonpath() -> str:
    return os.pathsep.join(str(p) for p in runtime_source())


def test_the_runtime_applies_gpu_mode_in_process_and_records_it(tmp_path: Path) -> None:
    """The injected runtime, in a fresh interpreter, as a torchrun rank would start."""
    probe = (
        "import json, torch\n"
        "b = torch.backends\n"
        "print(json.dumps([torch.are_deterministic_algorithms_enabled(), b.cudnn.deterministic,\n"
        "    b.cudnn.benchmark, b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, torch.initial_seed()]))\n"
    )
    env = {**plan("gpu", 1, None).env, "PYTHONPATH": _pythonpath(), "REPRO_RUNTIME_DIR": str(tmp_path),
           "REPRO_RUN_ID": "t", "REPRO_SEED": "7", "RANK": "1", "WORLD_SIZE": "2",
           "PATH": "/usr/bin:/bin"}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [True, True, False, False, False, 8]  # seed: master + rank
    knobs = json.loads((tmp_path / "knobs.rank1.json").read_text())
    assert knobs["tf32"] is False
    assert json.loads((tmp_path / "env.rank1.json").read_text())["world_size"] == 2
    assert not (tmp_path / "knobs.json").exists()  # a rank never writes the launcher's files


def test_the_runtime_records_the_process_group_backend(tmp_path: Path) -> None:
    script = (
        "import torch.distributed as dist\n"
        "dist.init_process_group('gloo', store=dist.HashStore(), rank=0, world_size=1)\n"
        "dist.destroy_process_group()\n"
    )
    env = {"PYTHONPATH": _pythonpath(), "REPRO_RUNTIME_DIR": str(tmp_path), "RANK": "0", "WORLD_SIZE": "1",
           "REPRO_RUN_ID": "t", "REPRO_MODE": "off", "PATH": "/usr/bin:/bin"}  # fmt: skip
    subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, check=True)
    assert json.loads((tmp_path / "knobs.rank0.json").read_text())["process_group_backend"] == "gloo"


# --------------------------------------------------------------------------- launching


def test_torchrun_wraps_the_command_only_for_several_processes() -> None:
    assert launch_argv(["python", "train.py", "--lr", "0.1"], 1) == ["python", "train.py", "--lr", "0.1"]
    argv = launch_argv(["python", "train.py", "--lr", "0.1"], 2, python="/venv/bin/python", log_dir="/r")
    assert argv == [
        "/venv/bin/python", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
        "--local-addr=127.0.0.1", "--log-dir=/r", "--redirects=3", "--tee=3", "train.py", "--lr", "0.1",
    ]  # fmt: skip
    assert launch_argv(["python3", "-m", "pkg.train"], 4)[-2:] == ["-m", "pkg.train"]


def _spec(tmp_path: Path, **kw: object) -> RunSpec:
    fields: dict[str, Any] = dict(
        argv=["python", "t.py"], project_root=tmp_path, workdir=".", env={}, runtime_dir=tmp_path / "rt",
        stdout_path=tmp_path / "o", stderr_path=tmp_path / "e",
    )  # fmt: skip
    fields.update(kw)
    return RunSpec(**fields)


def test_local_gpus_become_cuda_visible_devices(tmp_path: Path) -> None:
    backend = local.LocalBackend()
    assert backend.environment(_spec(tmp_path, gpus="2"))["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert backend.environment(_spec(tmp_path, gpus="1,3"))["CUDA_VISIBLE_DEVICES"] == "1,3"
    pinned = _spec(tmp_path, gpus="2", env={"CUDA_VISIBLE_DEVICES": ""})  # strict mode's pin wins
    assert backend.environment(pinned)["CUDA_VISIBLE_DEVICES"] == ""


def test_local_refuses_gpus_that_are_not_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "_gpu_count", lambda: 0)
    with pytest.raises(BackendUnavailable, match="no NVIDIA GPU is visible") as e:
        local.LocalBackend().prepare(_spec(tmp_path, gpus="all"), lambda ev: None)
    assert e.value.exit_code == 3
    monkeypatch.setattr(local, "_gpu_count", lambda: 1)
    with pytest.raises(BackendUnavailable, match="shows 1 NVIDIA GPU"):
        local.LocalBackend().prepare(_spec(tmp_path, gpus="2"), lambda ev: None)
    assert local.LocalBackend().prepare(_spec(tmp_path, gpus="1"), lambda ev: None) is None


def test_docker_gpus_become_device_requests_on_the_cuda_image(tmp_path: Path) -> None:
    docker_container = pytest.importorskip("repro.backends.docker.container")
    from repro.backends import images

    assert images.template_for("all") == "cuda" and images.template_for(None) == "cpu"
    assert "nvidia" in images.render_dockerfile("cuda", "sha256:" + "0" * 64).lower()
    (all_gpus,) = docker_container._device_requests("all")
    assert all_gpus["Count"] == -1 and all_gpus["Capabilities"] == [["gpu"]]
    assert docker_container._device_requests("2")[0]["Count"] == 2
    assert docker_container._device_requests("0,2")[0]["DeviceIDs"] == ["0", "2"]
    assert docker_container._device_requests(None) is None

    built = BuiltImage("sha256:x", "repro-env:t", "b", "sha256:b", "cuda", "", True, 0.0)
    spec = _spec(tmp_path, gpus="all", nproc_per_node=2, env=plan("gpu", 1, None).env)
    config = docker_container.container_config(spec, built, 1000, 1000, tmp_path / "tree", images.SHM_SIZE)
    assert config["host_config"]["device_requests"][0]["Count"] == -1
    assert config["host_config"]["shm_size"] == "2g"
    assert config["environment"]["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert "--nproc-per-node=2" in config["command"]
    assert f"--log-dir={docker_container.RUNTIME}/ranks" in config["command"]


def test_docker_refuses_gpus_when_the_engine_cannot_give_them(monkeypatch: pytest.MonkeyPatch) -> None:
    docker_container = pytest.importorskip("repro.backends.docker.container")

    class Engine:
        def info(self) -> dict[str, Any]:
            return {"Runtimes": {"runc": {}}}

    monkeypatch.setattr(docker_container.shutil, "which", lambda tool: None)
    with pytest.raises(BackendUnavailable, match="no NVIDIA runtime") as e:
        docker_container.check_gpus(Engine())
    assert e.value.exit_code == 3


# --------------------------------------------------------------------------- ranks in the record


def test_rank_env_logs_and_knobs_are_folded_into_the_record(tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    (runtime / "env.json").write_text(json.dumps({"python": "3.11.9", "world_size": 1, "device": "cpu"}))
    (runtime / "knobs.json").write_text(json.dumps({"threads": 1}))
    for rank in (0, 1):
        env = {"world_size": 2, "device": f"cuda:{rank}", "cuda": "12.4", "nccl": "2.21.5"}
        (runtime / f"env.rank{rank}.json").write_text(json.dumps(env))
    (runtime / "knobs.rank0.json").write_text(json.dumps({"threads": 1, "process_group_backend": "nccl"}))
    record = Record(id="r", created="now")
    record.command.nproc_per_node = 2
    _merge_process_env(record, runtime)
    assert record.env.world_size == 2
    assert record.env.rank_devices == {"0": "cuda:0", "1": "cuda:1"}
    assert record.env.cuda == "12.4" and record.env.nccl == "2.21.5"
    assert record.determinism.knobs["process_group_backend"] == "nccl"

    for attempt, rank in (("attempt_0", 0), ("attempt_0", 1)):
        d = runtime / "ranks" / "run_x" / attempt / str(rank)
        d.mkdir(parents=True)
        (d / "stdout.log").write_text(f"rank {rank}\n")
        (d / "stderr.log").write_text("")
    logs = _rank_logs(runtime)
    assert sorted(logs) == [0, 1] and (runtime / logs[1]["stdout"]).read_text() == "rank 1\n"


TORCHRUN_SUMMARY = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 4936)  (SIGTERM)
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-21_02:56:05
  host      : localhost
  rank      : 3 (local_rank: 3)
  exitcode  : 7 (pid: 4937)
============================================================
"""


def test_the_failing_rank_comes_from_torchruns_summary_else_from_a_traceback() -> None:
    assert failed_rank(TORCHRUN_SUMMARY, {0: "", 3: "boom"}) == (3, 7)
    assert failed_rank("killed", {0: "fine\n", 1: "Traceback (most recent call last):\n  x\n"}) == (1, None)
    assert failed_rank("killed", {0: "", 1: ""}) is None


# --------------------------------------------------------------------------- replay on other GPUs


def test_gpus_are_described_with_driver_and_cuda() -> None:
    assert describe_gpus(_env([H100, H100])) == "2× NVIDIA H100 80GB HBM3 (driver 550.54.15, CUDA 12.4)"
    assert describe_gpus(_env([])) == "no GPU"


def test_the_replay_note_says_what_to_expect_on_this_hardware() -> None:
    recorded = _env([H100, H100])
    same = gpu_hardware_note(recorded, _env([H100, H100], cuda=None))  # CUDA unknown before the run
    head = "recorded on 2× NVIDIA H100 80GB HBM3 (driver 550.54.15, CUDA 12.4), replaying on 2× NVIDIA H100"
    assert same.startswith(head)
    assert "can come back identical" in same

    other = gpu_hardware_note(recorded, _env([A100, A100], driver="535.104.05", cuda="12.1"))
    assert "other GPU model, other driver, other CUDA: expect within_tolerance at best" in other
    assert "other GPU count" in gpu_hardware_note(recorded, _env([H100]))
    assert "cannot run here" in gpu_hardware_note(recorded, _env([], driver=None))


def test_only_gpu_runs_get_the_note() -> None:
    record = Record(id="r", created="now")
    assert not uses_gpu(record)
    record.determinism.mode = "gpu"
    assert uses_gpu(record)
    record.determinism.mode, record.backend.gpus = "off", "all"
    assert uses_gpu(record)
