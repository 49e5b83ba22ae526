"""The runtime proves it ran: a command that never loaded it is said to be unseeded, everywhere."""

from __future__ import annotations

import sys

import pytest

from tests.builders import show_json
from tests.conftest import Project

pytestmark = pytest.mark.slow

SCRIPT = """\
import random
from pathlib import Path

Path("outputs").mkdir(exist_ok=True)
Path("outputs/draw.txt").write_text(f"{random.random()!r}\\n")
"""


@pytest.fixture
def drawing(project: Project) -> Project:
    project.write("draw.py", SCRIPT)
    project.commit("draw")
    return project


def test_python_dash_i_never_loads_the_runtime_and_nothing_claims_strict(drawing: Project) -> None:
    r = drawing.repro("run", "--backend", "local", "--seed", "3", "--", sys.executable, "-I", "draw.py")
    assert r.code == 0, r.err
    warnings = [line for line in r.err.splitlines() if "runtime never loaded" in line]
    assert len(warnings) == 1 and "NOT applied" in warnings[0]
    record = show_json(drawing)
    assert record["determinism"]["applied"] is False
    assert record["determinism"]["knobs"] == {}
    assert [o["path"] for o in record["results"]["outputs"]] == ["outputs/draw.txt"]

    replay = drawing.repro("replay", "latest")
    assert "(off mode" in replay.out and "(strict mode" not in replay.out
    assert "did not load" in replay.out
    assert replay.code == 5  # unseeded: another draw


def test_env_pythonpath_in_the_command_is_merged_and_the_run_is_seeded(drawing: Project) -> None:
    argv = ["--", "env", "PYTHONPATH=.", sys.executable, "draw.py"]
    draws = []
    for _ in range(2):
        r = drawing.repro("run", "--backend", "local", "--seed", "3", *argv)
        assert r.code == 0, r.err
        assert "runtime never loaded" not in r.err
        assert show_json(drawing)["determinism"]["applied"] is True
        draws.append((drawing.root / "outputs" / "draw.txt").read_text())
    assert draws[0] == draws[1]


def test_a_command_that_is_not_python_is_warned_about_and_its_files_still_recorded(drawing: Project) -> None:
    r = drawing.repro("run", "--backend", "local", "--", "sh", "-c", "echo hello > notes.txt")
    assert r.code == 0, r.err
    assert "runtime never loaded" in r.err
    record = show_json(drawing)
    assert record["determinism"]["applied"] is False
    assert [o["path"] for o in record["results"]["outputs"]] == ["notes.txt"]
