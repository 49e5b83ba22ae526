"""Nondeterministic ops: an error by default, counted in a ledger when allowed, in every process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import show_json
from tests.conftest import Project

pytestmark = pytest.mark.slow


def _line(text: str) -> int:
    lines = (Path(__file__).parent / "scripts" / "put_ops.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


@pytest.fixture
def put_ops(project: Project) -> Project:
    project.script("put_ops.py", "train.py")
    project.commit("train")
    return project


def test_strict_mode_stops_at_put_naming_the_op_the_line_and_the_opt_out(put_ops: Project) -> None:
    r = put_ops.repro("run", "--backend", "local", "--", "python", "train.py", "--workers", "0")
    assert r.code == 4, r.err
    errors = [line for line in r.err.splitlines() if line.startswith("repro: error:")]
    where = f"train.py:{_line('x.put_(')}"
    assert len(errors) == 1 and "put_" in errors[0] and where in errors[0], r.err
    assert "--allow-nondeterministic-ops" in r.err.split(errors[0])[1]  # the hint under it
    failure = show_json(put_ops)["results"]["failure"]
    assert failure["code"] == "nondeterministic_op" and failure["op"] == "put_"


def test_allowed_ops_are_counted_in_workers_and_ranks_and_replay_promises_no_identical(
    put_ops: Project,
) -> None:
    r = put_ops.repro(
        "run", "--backend", "local", "--nproc-per-node", "2", "--allow-nondeterministic-ops", "--trace",
        "--", "python", "train.py",
    )  # fmt: skip
    assert r.code == 0, r.err
    assert "FutureWarning" not in r.err  # nothing of the runtime's own reaches the output
    record = show_json(put_ops)
    det = record["determinism"]
    assert det["allow_nondeterministic_ops"] is True and det["applied"] is True
    assert record["command"]["torchrun"] is True and record["env"]["world_size"] == 2
    ledger = {(e["rank"], e["where"]): e for e in det["nondeterministic_ops"]}
    sample, step = f"train.py:{_line('x.put_(')}", f"train.py:{_line('bank.put_(')}"
    assert set(ledger) == {(0, sample), (1, sample), (0, step), (1, step)}
    assert {e["op"] for e in ledger.values()} == {"put_"}
    assert ledger[(0, sample)]["count"] == 8  # from both DataLoader workers of rank 0
    assert ledger[(1, step)]["count"] == 4 and ledger[(1, step)]["first_step"] == 1
    assert det["effective"]["deterministic_warn_only"] is True
    shown = put_ops.repro("show", "latest")
    assert "nondet ops" in shown.out and "put_ ×" in shown.out

    replay = put_ops.repro("replay", "latest")
    assert replay.code == 0, replay.err  # the replay allows the ops the run was allowed
    assert "expect within_tolerance at best" in replay.err
    assert "(strict mode" not in replay.out


def test_strict_mode_explains_a_script_that_wants_a_gpu(project: Project) -> None:
    project.write("train.py", "import torch\nx = torch.zeros(2).cuda()\nprint(x)\n")
    project.commit("cuda")
    r = project.repro("run", "--backend", "local", "--", "python", "train.py")
    assert r.code == 4
    assert "strict mode hides every GPU" in r.err and "--mode gpu --gpus N" in r.err
