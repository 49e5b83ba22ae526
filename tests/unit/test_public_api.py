"""The Python API as a user meets it: plain typed functions that `help`, `dir` and mypy --strict see.

This file is itself type-checked by `mypy --strict` in `make lint`: the calls below are how the
README's "The Python API" section uses it.
"""

from __future__ import annotations

import inspect
import os
import pydoc
import re
import subprocess
import sys
from pathlib import Path

import pytest

import repro
from repro.inprocess import InProcessRun
from tests.conftest import Project

REPO = Path(__file__).resolve().parents[2]
PUBLIC = ["capture", "checkpoint", "load_ipython_extension", "log_metric", "log_params", "output_dir", "seed"]


def _train(run: InProcessRun) -> str:
    repro.log_params(lr=0.1, depth=3)
    for step in range(3):
        repro.log_metric("loss", 1.0 / (step + 1), step=step)
    out: Path = repro.output_dir()
    (out / "model.txt").write_text(f"seed {repro.seed()}\n")
    return run.id


def test_capture_is_a_typed_function_that_records_a_block(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project.root)
    with repro.capture(outputs=["outputs"], seed=7) as run:
        run_id = _train(run)
    record = run.record
    assert record.id == run_id and record.results.status == "succeeded" and record.seeds.master == 7
    assert record.results.params == {"depth": 3, "lr": 0.1}
    assert record.results.final_metrics == {"loss": pytest.approx(1 / 3)}
    assert [o.path for o in record.results.outputs] == ["outputs/model.txt"]


def test_the_public_names_are_functions_with_docstrings_and_nothing_else_shows() -> None:
    assert sorted(repro.__all__) == sorted([*PUBLIC, "__version__"])
    assert dir(repro) == sorted(repro.__all__)
    for name in PUBLIC:
        obj = getattr(repro, name)
        assert inspect.isfunction(obj) or inspect.ismodule(obj), name
        assert (obj.__doc__ or "").strip(), f"{name} has no docstring"
    params = inspect.signature(repro.capture).parameters
    assert list(params) == ["data", "outputs", "seed", "cells", "start"]
    assert params["cells"].kind is inspect.Parameter.KEYWORD_ONLY


def test_help_lists_the_api() -> None:
    text = re.sub(".\b", "", pydoc.render_doc(repro))  # without the overstrike of bold
    for name in ("capture(", "log_metric(", "log_params(", "output_dir(", "seed("):
        assert name in text, name
    for leaked in ("importlib", "Any =", "annotations ="):
        assert leaked not in text


def test_outside_a_run_the_calls_are_harmless(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("REPRO_RUN_ID", "REPRO_RUNTIME_DIR", "REPRO_SEED", "REPRO_PROJECT_ROOT", "REPRO_OUTPUTS"):
        monkeypatch.delenv(name, raising=False)
    repro.log_metric("loss", 0.5)
    repro.log_params({"lr": 0.1}, depth=2)
    assert repro.seed() == 0
    assert repro.output_dir() == Path("outputs") and (tmp_path / "outputs").is_dir()


def _mypy(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """mypy --strict on a user's script, as over an installed package: repro's own modules are read
    for their types, not reported on; the ones behind `capture` are not followed (speed)."""
    (tmp_path / "train.py").write_text(code)
    (tmp_path / "mypy.ini").write_text(
        "[mypy]\nstrict = True\n[mypy-repro.inprocess]\nfollow_imports = skip\n"
        "[mypy-repro.integrations.*]\nfollow_imports = skip\n"
        "[mypy-repro]\nignore_errors = True\n[mypy-repro.*]\nignore_errors = True\n"
    )
    env = {**os.environ, "MYPYPATH": str(REPO)}
    cmd = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", str(tmp_path / "cache")]
    return subprocess.run([*cmd, "train.py"], cwd=tmp_path, env=env, capture_output=True, text=True)


def test_mypy_strict_catches_a_wrong_keyword_and_a_wrong_type(tmp_path: Path) -> None:
    good = (
        "import repro\n\n"
        "with repro.capture(data=['data'], outputs=['outputs'], seed=1) as run:\n"
        "    repro.log_metric('loss', 0.25, step=10)\n"
        "    repro.log_params(lr=0.1)\n"
        "    print(run.id, repro.seed(), repro.output_dir())\n"
    )
    ok = _mypy(tmp_path, good)
    assert ok.returncode == 0, ok.stdout
    wrong = "import repro\n\nwith repro.capture(dat=['data']):\n    repro.log_metric('loss', 'low')\n"
    bad = _mypy(tmp_path, wrong)
    assert bad.returncode == 1
    assert 'train.py:3: error: Unexpected keyword argument "dat" for "capture"' in bad.stdout
    assert 'train.py:4: error: Argument 2 to "log_metric" has incompatible type "str"' in bad.stdout
