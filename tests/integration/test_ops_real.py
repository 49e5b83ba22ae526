"""`--ops`: a divergence explained by its first differing tensor op, on real CPU training in strict mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult, Project

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "scripts" / "ops_mlp.py"


def _line(text: str) -> int:
    return next(i for i, line in enumerate(SCRIPT.read_text().splitlines(), 1) if text in line)


@pytest.fixture
def mlp(project: Project) -> Project:
    project.script("ops_mlp.py", "train.py")
    project.commit("train")
    return project


def _verdict(r: CliResult) -> dict[str, Any]:
    verdict: dict[str, Any] = json.loads(r.out)
    return verdict


def _op_reasons(verdict: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in verdict["reasons"] if r["code"] == "op_differs"]


def test_an_entropy_derived_value_in_block_2_is_named_with_its_line_and_step(mlp: Project) -> None:
    r = mlp.repro("run", "--backend", "local", "--", "python", "train.py", "--noisy-block", "2")
    assert r.code == 0, r.err
    plain = mlp.repro("replay", "latest")
    assert plain.code == 5 and "re-run with --ops to find the first differing operation" in plain.out

    r = mlp.repro("replay", "latest~1", "--ops", "--json")
    assert r.code == 5, r.err
    verdict = _verdict(r)
    assert verdict["status"] == "diverged"
    [op] = _op_reasons(verdict)
    f = op["fields"]
    assert f["kind"] == "value" and f["op"] == "aten::add.Tensor"
    assert f["module"] == "blocks.2" and f["where"] == f"train.py:{_line('os.urandom')}"
    assert (f["phase"], f["step"], f["rank"], f["inputs_same"]) == ("fwd", 0, 0, True)
    assert "the op itself is nondeterministic" in op["message"] and "train.py:" in op["message"]
    assert any("a fresh execution of the original's command" in n for n in verdict["notes"])
    rows = json.loads(mlp.repro("ls", "--json").out)["runs"]
    assert len(rows) == 3  # the run, the plain replay, the replay: not the execution for its stream
    assert json.loads(mlp.repro("show", "latest", "--json").out)["id"] == verdict["replay"]
    original = next(row["id"] for row in rows if row["kind"] == "run")
    assert all(row["parent"] == original for row in rows if row["kind"] == "replay")  # never a replay's
    again = mlp.repro("replay", original, "--ops")
    text = again.out
    assert "First differing op" in text, again.err
    assert "inputs identical: the op itself is nondeterministic" in text


def test_one_thread_replayed_at_two_names_the_first_op_whose_output_differs(mlp: Project) -> None:
    r = mlp.repro("run", "--backend", "local", "--ops", "--", "python", "train.py",
                  env={"TRAIN_THREADS": "1"})  # fmt: skip
    assert r.code == 0, r.err
    record = json.loads(mlp.repro("show", "latest", "--json").out)
    assert "ops" in record["results"]["logs"] and record["determinism"]["env"]["REPRO_OPS"] == "2"

    # The script takes its thread count from the environment, which the replay does not set again.
    r = mlp.repro("replay", "latest", "--json", env={"TRAIN_THREADS": "2"})
    assert r.code == 5, r.err
    verdict = _verdict(r)
    [op] = _op_reasons(verdict)  # the original's op stream against the replay's: no third execution
    f = op["fields"]
    assert f["kind"] == "value" and f["inputs_same"] is True and f["step"] == 0
    assert f["op"] == "aten::convolution_backward" and f["phase"] == "bwd" and f["module"] == "stem.0"
    assert f["where"] == f"train.py:{_line('loss.backward()')}"
    assert "the op itself is nondeterministic" in op["message"]
    assert any("the original's and the replay's" in n for n in verdict["notes"])
    assert len(json.loads(mlp.repro("ls", "--json").out)["runs"]) == 2


def test_an_identical_replay_with_ops_names_no_op(mlp: Project) -> None:
    assert mlp.repro("run", "--backend", "local", "--ops", "--", "python", "train.py").code == 0
    r = mlp.repro("replay", "latest", "--ops", "--json")
    assert r.code == 0, r.err
    verdict = _verdict(r)
    assert verdict["status"] == "identical" and not _op_reasons(verdict)
    assert "re-run with --ops" not in mlp.repro("replay", "latest~1").out


def test_check_with_ops_explains_a_repeat_that_diverged(mlp: Project) -> None:
    r = mlp.repro("check", "--backend", "local", "--ops", "--json", "--", "python", "train.py",
                  "--noisy-block", "2")  # fmt: skip
    assert r.code == 5, r.err
    assert "op_differs" in r.out and "blocks.2" in r.out and "aten::add.Tensor" in r.out
