"""`--ops`: a divergence explained by its first differing tensor op, on real CPU training in strict mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from repro.compare import ops
from repro.store.runs import Store
from tests.conftest import CliResult, Project

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "scripts" / "ops_mlp.py"


def _line(text: str) -> int:
    return next(i for i, line in enumerate(SCRIPT.read_text().splitlines(), 1) if text in line)


@pytest.fixture
def mlp(project: Project) -> Project:
    project.script("ops_mlp.py", "train.py")
    project.write("repro.yaml", "threads: 1\n")  # the replays at 2 threads differ from these by N alone
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


def _ops_rows(project: Project, run_id: str) -> list[dict[str, Any]]:
    """A run's recorded op stream, read here row by row (not through the product's parser)."""
    record = json.loads(project.repro("show", run_id, "--json").out)
    blob = Store(project.root).read_blob(record["results"]["logs"]["ops"])
    assert blob is not None
    return [json.loads(line) for line in blob.decode().splitlines() if line.strip()]


def test_one_thread_replayed_at_two_names_the_first_op_whose_output_differs(mlp: Project) -> None:
    # Which op first gives other bits at another thread count is the CPU's and its BLAS's choice
    # (a convolution's backward on AMD EPYC, MKL's matrix multiply on Intel Xeon): the test reads the
    # two streams itself and checks that the op named is their first row whose output differs.
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
    runs = json.loads(mlp.repro("ls", "--json").out)["runs"]
    assert len(runs) == 2
    original = next(row["id"] for row in runs if row["kind"] == "run")
    replay = next(row["id"] for row in runs if row["kind"] == "replay")
    pairs = zip(_ops_rows(mlp, original), _ops_rows(mlp, replay), strict=False)
    a, b = next((a, b) for a, b in pairs if a.get("out") != b.get("out"))
    assert a["op"] == b["op"]  # the same op ran on both sides: its output, not the sequence, differs
    assert (f["kind"], f["op"], f["phase"], f["module"]) == ("value", a["op"], a["phase"], a["module"])
    assert (f["where"], f["step"]) == (a["where"], a["step"])
    assert f["inputs_same"] is (a["in"] == b["in"]) is True  # same inputs: the kernel gave other bits
    assert f["where"].startswith("train.py:")
    assert "the op itself is nondeterministic" in op["message"]
    assert any("the original's and the replay's" in n for n in verdict["notes"])


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


def test_the_readmes_example_a_run_at_one_thread_replayed_at_two(mlp: Project) -> None:
    """README "The first differing operation", as written: `repro run --ops --threads 1`,
    `repro replay latest --threads 2`. Where the bits differ, the op named is the first row at which the
    two recorded streams differ (walked here, row by row); where they do not, no op is named."""
    script = mlp.root / "train.py"  # threads as repro pins them, not as the script sets them
    own = 'torch.set_num_threads(int(os.environ.get("TRAIN_THREADS", "1")))'
    assert own in script.read_text()
    script.write_text(script.read_text().replace(own, "pass"))
    mlp.commit("threads from repro")
    assert (
        mlp.repro("run", "--backend", "local", "--ops", "--threads", "1", "--", "python", "train.py").code
        == 0
    )
    r = mlp.repro("replay", "latest", "--threads", "2", "--json")
    verdict = _verdict(r)
    assert any(n.startswith("thread count differs: the replay ran at 2") for n in verdict["notes"])
    store = Store(mlp.root)
    replay = store.load_run(verdict["replay_id"])
    original = store.load_run(str(replay.record.parent))
    assert replay.record.determinism.threads == 2 and original.record.determinism.threads == 1
    a = ops.streams(original.record.results.logs, original.read_blob)[0]
    b = ops.streams(replay.record.results.logs, replay.read_blob)[0]
    first = next(
        (x for x, y in zip(a, b, strict=False) if (x["op"], x.get("out")) != (y["op"], y.get("out"))), None
    )
    if verdict["status"] == "identical":  # this CPU gave the same bits at 2 threads
        assert r.code == 0 and not _op_reasons(verdict) and first is None
        return
    assert r.code == 5, r.err
    [op] = _op_reasons(verdict)
    assert first is not None
    f = op["fields"]
    named = (f["op"], f["step"], f["phase"], f["where"])
    assert named == (first["op"], first["step"], first.get("phase", "fwd"), first.get("where"))
    assert f["index"] == first["i"]
