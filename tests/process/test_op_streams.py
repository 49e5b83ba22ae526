"""The op-stream comparison (`repro.compare.ops`) on hand-written streams, the verdict it adds to,
and the recorder (`repro.runtime.opstream`) on a real torch model in its own process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from repro.compare import ops
from repro.compare.reasons import CODES, Code
from repro.compare.verdict import Verdict
from repro.runtime import contract
from repro.ui.verdict import render_text

Row = dict[str, Any]


def _row(i: int, op: str, out: str, ins: list[str], step: int = 0, **extra: Any) -> Row:
    base: Row = {"i": i, "step": step, "op": op, "phase": "fwd", "node": None, "module": None,
                 "where": "train.py:10", "out": [out], "in": ins}  # fmt: skip
    return {**base, **extra}


STREAM = [
    _row(0, "aten::t", "t0", ["w0"], module="blocks.0.fc"),
    _row(1, "aten::addmm", "a1", ["b0", "x0", "t0"], module="blocks.0.fc", where="train.py:19"),
    _row(
        2,
        "aten::add.Tensor",
        "h2",
        ["a1"],
        module="blocks.2",
        where="train.py:21",
        sum=3.0,
        values=[1.0, 2.0],
    ),  # fmt: skip
    _row(
        3,
        "aten::mm",
        "g3",
        ["h2", "w1"],
        phase="bwd",
        node="AddmmBackward0",
        module="head",
        where="train.py:40",
    ),  # fmt: skip
]


def _replace(rows: list[Row], index: int, **changes: Any) -> list[Row]:
    return [{**r, **changes} if r["i"] == index else r for r in rows]


def test_identical_streams_have_no_difference() -> None:
    assert ops.first_difference({0: STREAM}, {0: [dict(r) for r in STREAM]}) is None


def test_an_op_that_gave_other_bits_for_the_same_inputs_is_named_nondeterministic() -> None:
    other = _replace(STREAM, 2, out=["h2'"], sum=3.5, values=[1.0, 2.5])
    d = ops.first_difference({0: STREAM}, {0: other})
    assert d is not None and d.kind == "value" and d.inputs_same is True
    assert (d.op, d.module, d.where, d.phase, d.step, d.rank, d.index) == (
        "aten::add.Tensor", "blocks.2", "train.py:21", "fwd", 0, 0, 2,
    )  # fmt: skip
    assert d.max_abs == 0.5 and d.size == "max abs diff 0.5"
    text = ops.describe(d)
    assert "aten::add.Tensor" in text and "in blocks.2" in text and "train.py:21" in text
    assert "forward" in text and "optimizer step 0" in text and "the op itself is nondeterministic" in text


def test_an_op_fed_different_inputs_points_at_the_data_or_an_earlier_value() -> None:
    other = _replace(_replace(STREAM, 3, out=["g3'"], **{"in": ["h2", "w1'"]}), 2)
    d = ops.first_difference({0: STREAM}, {0: other})
    assert d is not None and d.inputs_same is False and d.phase == "bwd" and d.node == "AddmmBackward0"
    assert d.size == "hash differs" and d.max_abs is None
    assert "backward (AddmmBackward0)" in ops.describe(d) and "inputs already differed" in ops.describe(d)


def test_the_earliest_step_over_ranks_wins_and_a_big_output_gives_the_sum_s_change() -> None:
    late = _replace([{**r, "step": 1} for r in STREAM], 1, out=["x"])
    early = _replace(STREAM, 3, out=["y"], sum=2.0)
    rank1 = _replace(STREAM, 3, sum=2.25, out=["z"])
    d = ops.first_difference({0: [{**r, "step": 1} for r in STREAM], 1: early}, {0: late, 1: rank1})
    assert d is not None and (d.rank, d.step, d.index) == (1, 0, 3)
    assert d.size == "hash differs (sums differ by 0.25)"


def test_another_op_sequence_and_a_shorter_stream() -> None:
    d = ops.first_difference({0: STREAM}, {0: _replace(STREAM, 1, op="aten::mm")})
    assert d is not None and d.kind == "sequence" and d.replay_op == "aten::mm" and d.inputs_same is None
    assert "aten::addmm vs aten::mm" in ops.describe(d)
    d = ops.first_difference({0: STREAM}, {0: STREAM[:2]})
    assert d is not None and d.kind == "length" and d.index == 2


def test_a_truncated_stream_gives_no_verdict_past_its_end() -> None:
    cut = [*STREAM[:2], {"truncated": True, "step": 0}]
    assert ops.first_difference({0: STREAM}, {0: cut}) is None


def test_within_keeps_the_window_and_parse_skips_bad_lines() -> None:
    rows = [*STREAM, _row(4, "aten::mm", "q", [], step=1)]
    assert ops.within(rows, 1) == STREAM
    text = "\n".join(json.dumps(r) for r in STREAM[:2]) + '\nnot json\n{"x": 1}\n{"truncated": true}\n'
    assert ops.parse(text) == [*STREAM[:2], {"truncated": True}]


def test_streams_are_read_by_rank_from_the_logs() -> None:
    blobs = {"b0": b'{"op": "aten::t", "out": []}\n', "b1": b'{"op": "aten::mm", "out": []}\n'}
    logs = {"stdout": "s", "ops": "b0", "ops.rank1": "b1", "ops.rankx": "b1"}
    found = ops.streams(logs, blobs.get)
    assert sorted(found) == [0, 1] and found[1][0]["op"] == "aten::mm"


def test_explain_adds_the_reason_code_or_says_why_there_is_none() -> None:
    assert Code.OP_DIFFERS in CODES
    v = Verdict(status="diverged", mode="strict")
    ops.explain(v, {0: STREAM}, {0: _replace(STREAM, 2, out=["?"])}, 2, "the original's")
    assert v.ops_compared and v.reasons[-1].code == Code.OP_DIFFERS
    fields = v.reasons[-1].fields
    assert (fields["op"], fields["module"], fields["inputs_same"], fields["step"]) == (
        "aten::add.Tensor", "blocks.2", True, 0,
    )  # fmt: skip
    text = render_text(v, colour=False)
    assert "First differing op\n  aten::add.Tensor (#2), forward, in blocks.2\n  at train.py:21" in text
    assert "max abs diff" not in text and "hash differs" in text and "inputs identical" in text
    assert "re-run with --ops" not in text
    same = Verdict(status="diverged", mode="strict")
    ops.explain(same, {0: STREAM}, {0: STREAM}, 2, "the original's")
    assert not same.reasons and "raise --ops-steps" in same.notes[0]


def test_an_explained_divergence_names_no_op() -> None:
    """DLRM's two ranks saving one model.pt: the race explains the divergence, and the op streams of
    the two runs (which part at the first collective, the ranks' inputs already different) name no op."""
    from repro.compare.reasons import Code, Reason

    for code, message in (
        (Code.CONCURRENT_WRITE, "output model.pt was written by ranks 0 and 1 at once"),
        (Code.DATA_ORDER_DIFFERS, "data order differs at DataLoader #1, step 0"),
    ):
        v = Verdict(status="diverged", mode="strict", reasons=[Reason(code, message, "model.pt")])
        ops.explain(v, {0: STREAM}, {0: _replace(STREAM, 1, out=["?"])}, 2, "the original's")
        assert [r.code for r in v.reasons] == [code] and v.ops_compared
        assert v.notes == [f"--ops: no op is named: the divergence is already explained ({message})"]
        assert "First differing op" not in render_text(v, colour=False)


def test_a_strict_divergence_suggests_ops_until_they_were_compared() -> None:
    v = Verdict(status="diverged", mode="strict", summary="outputs differ")
    assert "re-run with --ops to find the first differing operation" in render_text(v, colour=False)
    v.ops_compared = True
    assert "re-run with --ops" not in render_text(v, colour=False)
    off = Verdict(status="within_tolerance", mode="off")
    assert "re-run with --ops" not in render_text(off, colour=False)


SCRIPT = """
import os, torch
from torch import nn

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
    def forward(self, x):
        return x + torch.relu(self.fc(x))

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(3))
    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x.sum()

torch.manual_seed(0)
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(4):
    loss = net(torch.randn(4, 8))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done", step)
"""


def _line(text: str) -> int:
    return next(i for i, line in enumerate(SCRIPT.splitlines(), 1) if text in line)


def _record(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], list[Row]]:
    (tmp_path / "train.py").write_text(SCRIPT)
    runtime = tmp_path / "runtime"
    shutil.rmtree(runtime, ignore_errors=True)
    runtime.mkdir()
    boot = (
        "from repro.runtime import boot; boot.boot(); import runpy; "
        "runpy.run_path('train.py', run_name='__main__')"
    )
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.run(
        [sys.executable, "-c", boot], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": root, contract.RUNTIME_DIR_ENV: str(runtime),
             contract.PROJECT_ROOT_ENV: str(tmp_path), **env},
    )  # fmt: skip
    path = runtime / contract.OPS_FILE
    return proc, ops.parse(path.read_text()) if path.exists() else []


def test_the_recorder_names_modules_lines_phases_and_steps_and_stops_after_k(tmp_path: Path) -> None:
    proc, rows = _record(tmp_path, {contract.OPS_ENV: "2"})
    assert proc.returncode == 0 and "done 3" in proc.stdout, proc.stderr
    assert {r["step"] for r in rows} == {0, 1}  # two optimizer steps, then the mode is left
    fwd = [r for r in rows if r["phase"] == "fwd" and r["module"] == "blocks.1.fc"]
    forward_line = f"train.py:{_line('return x + torch.relu')}"
    assert fwd and fwd[0]["where"] == forward_line and fwd[0]["op"].startswith("aten::")
    add = next(r for r in rows if r["module"] == "blocks.2" and r["op"] == "aten::add.Tensor")
    assert add["where"] == forward_line and len(add["in"]) == 2 and len(add["values"]) == 32
    bwd = [r for r in rows if r["phase"] == "bwd"]
    assert {r["module"] for r in bwd} >= {"blocks.0.fc", "blocks.2.fc", "blocks.1"}
    assert all(r["where"] == f"train.py:{_line('loss.backward()')}" for r in bwd) and bwd[0]["node"]
    assert [r["i"] for r in rows] == list(range(len(rows)))
    again = _record(tmp_path, {contract.OPS_ENV: "2"})[1]
    assert [r["out"] for r in again] == [r["out"] for r in rows]  # the same bits, op by op


def test_the_recorder_can_end_the_process_after_its_window(tmp_path: Path) -> None:
    proc, rows = _record(tmp_path, {contract.OPS_ENV: "1", contract.OPS_STOP_ENV: "1"})
    assert proc.returncode == 0 and "done" not in proc.stdout
    assert rows and {r["step"] for r in rows} == {0}


def test_the_device_digest_changes_with_any_bit_and_only_then() -> None:
    import torch

    from repro.runtime import opstream as recorder

    def words(x: torch.Tensor) -> list[int]:
        got: list[int] = recorder._device_words(torch, x).tolist()
        return got

    x = torch.linspace(-1, 1, 1000)
    nudged = x.clone()
    nudged[500] = torch.nextafter(nudged[500], torch.tensor(2.0))
    assert words(x) == words(x.clone()) and words(x) != words(nudged)
    assert words(x) != words(x.reshape(10, 100))  # the shape counts
    swapped = x.clone()
    swapped[[1, 2]] = swapped[[2, 1]]
    assert words(x) != words(swapped)  # so does the order of the elements
    for t in (x.bfloat16(), x > 0, (x * 100).long(), torch.zeros(0)):
        assert words(t) == words(t.clone())


def test_the_hint_to_rerun_with_ops_comes_only_where_the_op_stream_would_say_more() -> None:
    from repro.compare.ops import would_help
    from repro.compare.reasons import Reason
    from repro.compare.verdict import Verdict
    from repro.runtime.contract import Mode

    def verdict(*reason_codes: Code, mode: Mode = "strict", compared: bool = False) -> Verdict:
        v = Verdict(status="diverged", mode=mode, summary="diverged")
        v.reasons = [Reason(code, code) for code in reason_codes]
        v.ops_compared = compared
        return v

    assert would_help(verdict(Code.TENSOR_DIFFERS, Code.LOG_DIFFERS))
    assert not would_help(verdict(Code.TENSOR_DIFFERS, mode="gpu"))
    assert not would_help(verdict(Code.TENSOR_DIFFERS, compared=True))
    for explained in (Code.DATA_ORDER_DIFFERS, Code.CONCURRENT_WRITE, Code.RUN_FAILED):
        assert not would_help(verdict(Code.OUTPUT_DIFFERS, explained))


def test_op_rows_of_another_shape_from_a_capsule_are_left_out_not_crashed_on() -> None:
    from repro.compare.ops import first_difference, parse

    hostile = "\n".join(
        [
            '{"op": 5, "step": 0, "out": ["a"]}',
            '{"op": "aten::add.Tensor", "step": "x", "out": ["a"]}',
            '{"op": "aten::add.Tensor", "step": true, "out": ["a"]}',
            '{"op": "aten::add.Tensor", "i": -1, "out": ["a"]}',
            '{"op": "aten::add.Tensor", "phase": "sideways", "out": ["a"]}',
            '{"op": "aten::add.Tensor", "module": ["m"], "out": ["a"]}',
            '{"op": "aten::add.Tensor", "values": [1, "x"], "out": ["a"]}',
            '{"op": "aten::add.Tensor", "sum": "big", "out": ["a"]}',
            '{"truncated": "yes"}',
            "[1, 2]",
        ]
    )
    assert parse(hostile) == []
    good = '{"i": 0, "step": 0, "op": "aten::mul.Tensor", "phase": "fwd", "out": ["a"], "values": [1.0]}'
    other = good.replace('"a"', '"b"').replace("1.0", "1.5")
    diff = first_difference({0: parse(hostile + "\n" + good)}, {0: parse(other)})
    assert diff is not None and diff.op == "aten::mul.Tensor" and diff.max_abs == 0.5
