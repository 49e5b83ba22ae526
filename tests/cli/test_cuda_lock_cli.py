"""`repro lock --variant cuda` and `repro build --gpus`: the cuda.index setting and CUDA wheels, for real.

pip-compile runs against this machine's own pip configuration, whose find-links folder holds
`torch==2.13.0+cpu`: with `--cuda-index none` a cuda lock resolves to that CPU build, and is refused.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from repro.errors import ExitCode
from tests.conftest import Cli


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _project(tmp_path: Path, requirements: str) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "repro.yaml").write_text("backend: local\n")
    (root / "requirements.in").write_text(requirements)
    return root


def test_an_unreachable_cuda_index_fails_lock_and_build_in_seconds(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "cache"))
    root = _project(tmp_path, "torch\n")
    index = f"http://127.0.0.1:{_closed_port()}/whl/cu128"
    for argv, env in [
        (("lock", "--variant", "cuda", "--cuda-index", index), {}),
        (("lock", "--variant", "cuda"), {"REPRO_CUDA_INDEX": index}),
        (("build", "--gpus"), {"REPRO_CUDA_INDEX": index}),
    ]:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        start = time.monotonic()
        failed = cli(*argv, cwd=root)
        assert time.monotonic() - start < 15, argv
        assert failed.code == ExitCode.UNEXPECTED, failed.err
        error = next(line for line in failed.err.splitlines() if line.startswith("repro: error:"))
        refused = "(cuda.index) does not answer: connection refused"
        assert error == f"repro: error: the CUDA wheel index {index} {refused}"
        assert "hint: set cuda.index (--cuda-index, REPRO_CUDA_INDEX or repro.yaml)" in failed.err
        assert "Retrying" not in failed.err and "Traceback" not in failed.err
    assert not (root / "lockfiles").exists()


def test_a_cuda_lock_that_resolves_to_a_cpu_torch_is_refused(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "cache"))
    root = _project(tmp_path, "torch==2.13.0\n")
    refused = cli("lock", "--variant", "cuda", "--cuda-index", "none", cwd=root)
    assert refused.code == ExitCode.UNEXPECTED, refused.out
    assert (
        "repro: error: the cuda lock holds torch==2.13.0+cpu, a CPU build (no CUDA runtime): "
        "an image from it would have no CUDA"
    ) in refused.err
    assert "hint: set cuda.index to an index with CUDA wheels" in refused.err
    assert not (root / "lockfiles" / "requirements-cuda.lock.txt").exists()  # nothing kept or cached
    assert not list((tmp_path / "cache" / "locks").glob("*.txt"))
    bad = cli("lock", "--variant", "cuda", "--cuda-index", "download.pytorch.org", cwd=root)
    assert bad.code == ExitCode.USAGE and "is not a package index URL (from --cuda-index)" in bad.err
