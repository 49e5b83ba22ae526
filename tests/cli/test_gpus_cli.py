"""`--gpus` where no GPU is: exit 3 with a clear message, and nothing recorded."""

from __future__ import annotations

import json
import shutil

import pytest

from repro.backends import local
from tests.builders import toy
from tests.conftest import Cli, Project


def test_local_gpus_asked_for_and_none_present_exits_3(
    project: Project,
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(local, "_gpu_count", lambda: 0)  # as on a CPU-only machine
    r = cli("run", "--backend", "local", "--gpus", "1", "--", "python", "t.py", cwd=toy(project).root)
    assert r.code == 3
    assert "--gpus 1 was asked for, but no NVIDIA GPU is visible on this machine" in r.err
    assert "trained" not in r.err + r.out
    assert json.loads(cli("ls", "--json").out)["runs"] == []


@pytest.mark.skipif(bool(shutil.which("nvidia-smi")), reason="this machine has an NVIDIA GPU")
def test_local_gpus_on_this_machine_without_a_gpu(project: Project) -> None:
    r = toy(project).repro("run", "--backend", "local", "--gpus", "all", "t.py")
    assert r.code == 3 and "no NVIDIA GPU is visible" in r.err


@pytest.mark.docker
def test_docker_gpus_without_an_nvidia_runtime_exits_3(project: Project, cli) -> None:  # type: ignore[no-untyped-def]
    from repro.backends.docker.container import _GPU_TOOLS
    from repro.backends.docker.engine import engine, engine_available

    if not engine_available():
        pytest.skip("no Docker engine answers (start one with `make docker-up`, or set DOCKER_HOST)")
    with engine() as client:
        if "nvidia" in (client.info().get("Runtimes") or {}) or any(map(shutil.which, _GPU_TOOLS)):
            pytest.skip("this engine can give GPUs")
    r = cli("run", "--backend", "docker", "--gpus", "all", "--", "python", "t.py", cwd=toy(project).root)
    assert r.code == 3
    assert "GPUs were asked for, but the Docker engine has no NVIDIA runtime" in r.err
    assert json.loads(cli("ls", "--json").out)["runs"] == []


@pytest.mark.parametrize("command", ["run", "check", "build"])
def test_gpus_takes_the_same_values_everywhere(command: str, cli: Cli) -> None:
    from repro.cli import cli as group

    tail = ["--", "python", "t.py"] if command != "build" else []
    for given, parsed in ((["--gpus", "2"], "2"), (["--gpus", "all"], "all"), (["--gpus", "0, 1"], "0,1"),
                          (["--gpus"], "all"), ([], None)):  # fmt: skip
        ctx = group.load(command).make_context(command, [*given, *tail])
        assert ctx.params["gpus"] == parsed, (command, given)
    for bad in ("0", "two", "1,,2", ""):
        r = cli(command, "--gpus", bad, *tail)
        assert r.code == 2 and r.err.startswith("repro: error: --gpus must be"), (command, bad, r.err)
        assert "--gpus all, --gpus 2 or --gpus 0,1" in r.err
