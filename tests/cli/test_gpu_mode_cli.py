"""`--mode gpu` with no GPU given or found: refused with a hint (exit 2), and nothing recorded."""

from __future__ import annotations

import json
import shutil

import pytest

from repro.errors import ExitCode, UsageError
from repro.facts.determinism import check_gpu_mode
from tests.conftest import Cli, Project


@pytest.mark.skipif(bool(shutil.which("nvidia-smi")), reason="this machine has an NVIDIA GPU")
@pytest.mark.parametrize(
    ("argv", "env", "source"),
    [
        (("--mode", "gpu", "--backend", "local"), {}, "--mode"),
        (("--backend", "local"), {"REPRO_MODE": "gpu"}, "REPRO_MODE"),
        (("--mode", "gpu", "--backend", "docker"), {}, "--mode"),
    ],
)
def test_gpu_mode_without_a_gpu_is_refused_and_not_recorded(
    project: Project,
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    argv: tuple[str, ...],
    env: dict[str, str],
    source: str,
) -> None:
    project.write("train.py", "print('trained on', __import__('os').environ.get('CUDA_VISIBLE_DEVICES'))\n")
    project.commit("train")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    r = cli("run", *argv, "--", "python", "train.py", cwd=project.root)
    assert r.code == ExitCode.USAGE, r.err
    assert (
        f"repro: error: gpu mode (from {source}) but the run gets no GPU: none was given (--gpus) "
        "and this machine has none (nvidia-smi lists no GPU)"
    ) in r.err
    assert "hint: give it GPUs with --gpus all (or N), or run on the CPU: --mode strict" in r.err
    assert "trained" not in r.out + r.err and "Traceback" not in r.err
    assert json.loads(cli("ls", "--json", cwd=project.root).out)["runs"] == []
    strict = cli("run", "--backend", "local", "--mode", "strict", "train.py", cwd=project.root)
    assert strict.code == 0 and "trained on" in strict.out


def test_gpu_mode_is_allowed_where_the_run_gets_a_gpu() -> None:
    check_gpu_mode("gpu", "all", 0, "docker", "--gpus", here=False)  # given: the backend checks them
    check_gpu_mode("gpu", None, 2, "local", "--mode", here=True)  # found: a local run sees these GPUs
    check_gpu_mode("strict", None, 0, "docker", "default", here=False)
    with pytest.raises(UsageError, match="the docker backend gives a run GPUs only with --gpus"):
        check_gpu_mode("gpu", None, 2, "docker", "--mode", here=False)
    with pytest.raises(UsageError, match="the auto backend gives a run GPUs only with --gpus"):
        check_gpu_mode("gpu", None, 1, "auto", "repro.yaml", here=False)
