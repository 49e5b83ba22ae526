"""The `--trace` fingerprints inside the training process: values, one transfer, buffered lines."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

from repro.compare import trace
from repro.runtime import jsonl, steptrace


def _float64_sums(x: torch.Tensor) -> list[float]:
    """What the trace recorded before: a float64 copy, then its sums (older records hold these)."""
    d = x.detach().double()
    return [d.sum().item(), d.abs().sum().item()]


def _word_sum(x: torch.Tensor) -> int:
    """The bits by their definition: the tensor's bytes as little-endian 64-bit words, summed mod 2**64."""
    flat = x.detach().contiguous().reshape(-1)
    data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    data += bytes(-len(data) % 8)
    return sum(int.from_bytes(data[i : i + 8], "little") for i in range(0, len(data), 8)) % (1 << 64)


def test_fingerprints_are_a_sum_and_the_word_sum_of_the_bytes_the_same_every_time() -> None:
    torch.manual_seed(3)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3), torch.nn.Flatten(), torch.nn.Linear(16 * 30 * 30, 10)
    )
    tensors = [*model.parameters(), torch.randn(400_001), torch.randn(64, 63).t(), torch.randn(7).double()]
    found = steptrace.fingerprints(torch, tensors)
    assert found == steptrace.fingerprints(torch, [t.clone() for t in tensors])
    for (total, bits), x in zip(found, tensors, strict=True):
        exact_sum, abs_sum = _float64_sums(x)
        assert abs(total - exact_sum) <= trace.FLOAT32_RTOL * abs_sum  # what an older trace is compared to
        assert isinstance(bits, int) and bits == _word_sum(x)
    assert steptrace.fingerprints(torch, []) == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_one_ulp_of_any_one_weight_changes_the_fingerprint(dtype: torch.dtype) -> None:
    torch.manual_seed(4)
    x = torch.randn(100_003).to(dtype)  # odd: the last word is a padded one
    before = steptrace.fingerprints(torch, [x])
    for i in (0, 12_345, 100_002):
        up = x.clone()
        up[i] = torch.nextafter(up[i], torch.tensor(float("inf"), dtype=dtype))  # one ulp
        assert steptrace.fingerprints(torch, [up]) != before
        flipped = x.clone()
        flipped[i] = -flipped[i]
        assert steptrace.fingerprints(torch, [flipped]) != before


def test_tensors_numpy_cannot_read_are_read_by_torch_alike() -> None:
    tensors = [torch.randn(100), torch.randn(51).bfloat16(), torch.randn(7), torch.randn(3).half()]
    found = steptrace.fingerprints(torch, tensors)
    assert [bits for _, bits in found] == [_word_sum(x) for x in tensors]
    assert found[1][0] == _float64_sums(tensors[1])[0] and found[3][0] == _float64_sums(tensors[3])[0]


def test_views_kept_between_steps_follow_the_tensor_they_read() -> None:
    views = steptrace.Views()
    layer = torch.nn.Linear(64, 32)
    first = steptrace.fingerprints(torch, [layer.weight, layer.bias], views)
    assert len(views.by_id) == 2
    with torch.no_grad():
        layer.weight.add_(1.0)  # in place: read through the same views
    moved = steptrace.fingerprints(torch, [layer.weight, layer.bias], views)
    assert moved[0] != first[0] and moved[1] == first[1] and moved[0][1] == _word_sum(layer.weight)
    layer.weight.data = torch.zeros(32, 64)  # another storage: new views
    assert steptrace.fingerprints(torch, [layer.weight], views) == [[0.0, 0]]
    layer.weight.data = layer.weight.data[:16]  # the same storage, fewer elements
    assert steptrace.fingerprints(torch, [layer.weight], views)[0][1] == _word_sum(layer.weight)
    del layer
    import gc

    gc.collect()
    assert views.by_id == {}  # a tensor's views go with it


def test_one_host_transfer_per_step(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"item": 0}
    original = torch.Tensor.item

    def item(self: torch.Tensor) -> object:
        calls["item"] += 1
        return original(self)

    monkeypatch.setattr(torch.Tensor, "item", item)
    steptrace.fingerprints(torch, [torch.randn(10) for _ in range(50)])
    assert calls["item"] == 0  # one tolist() of the stacked sums, no per-parameter .item()


def _trace_appender(path: Path, monkeypatch: pytest.MonkeyPatch) -> jsonl.Appender:
    """The trace's appender as `steptrace.install` makes it, the clock held within one second."""
    monkeypatch.setattr("repro.runtime.jsonl.time.monotonic", lambda: 1e18)
    appender = jsonl.Appender(
        "trace",
        path=str(path),
        flush_seconds=steptrace.FLUSH_SECONDS,
        flush_bytes=steptrace.FLUSH_BYTES,
        dumps=steptrace._written_out,
    )
    monkeypatch.setattr(steptrace, "_appender", [appender])
    return appender


W = (["w"], steptrace._templates(["w"]))  # one parameter set: the names and the line templates


def _keep(appender: jsonl.Appender, step: int, flat: list[Any], sums: bool) -> None:
    appender.write_later((step, W, flat, sums), steptrace.NUMBER_BYTES * len(flat))


def test_rows_are_kept_then_written_whole_and_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "trace.jsonl"
    appender = _trace_appender(path, monkeypatch)  # within the second: kept
    for step in range(3):
        _keep(appender, step, [1.5, 2] if step == 0 else [None, 3], step == 0)
    assert not path.exists()
    steptrace.flush()
    found = trace.parse(path.read_text())
    assert [r["step"] for r in found] == [0, 1, 2]
    assert found[0]["params"] == {"w": [1.5, 2]} and found[1]["params"] == {"w": [None, 3]}
    _keep(appender, 3, [float("nan"), 4], True)  # a sum that is not finite: written by json
    monkeypatch.setattr("repro.runtime.jsonl.time.monotonic", lambda: 2e18)  # a second later: written at once
    _keep(appender, 4, [None, 5], False)
    assert [r["step"] for r in trace.parse(path.read_text())] == [0, 1, 2, 3, 4]


def test_rows_are_written_once_they_would_fill_the_buffer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "trace.jsonl"
    appender = _trace_appender(path, monkeypatch)
    rows = -(-steptrace.FLUSH_BYTES // (2 * steptrace.NUMBER_BYTES))  # the last one reaches the bound
    for step in range(rows):
        _keep(appender, step, [None, step], False)
    assert len(trace.parse(path.read_text())) == rows


def test_a_row_that_cannot_be_written_out_is_dropped_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "trace.jsonl"
    appender = _trace_appender(path, monkeypatch)
    _keep(appender, 0, [None, 1], False)
    appender.write_later((1, (["w"], None), [object(), 2], True), 48)  # json cannot write an object
    _keep(appender, 2, [None, 3], False)
    steptrace.flush()
    assert [r["step"] for r in trace.parse(path.read_text())] == [0, 2]


def test_a_forked_child_does_not_write_the_parents_lines_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "trace.jsonl"
    _keep(_trace_appender(path, monkeypatch), 0, [None, 7], False)
    pid = os.fork()
    if pid == 0:  # what a DataLoader worker gets
        steptrace.flush()
        os._exit(0)
    os.waitpid(pid, 0)
    assert not path.exists()
    steptrace.flush()
    assert trace.parse(path.read_text()) == [
        {"step": 0, "f": steptrace.SUMMATION, "params": {"w": [None, 7]}}
    ]


def test_the_hook_writes_json_lines_with_sums_every_few_steps_and_digests_at_every_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import math

    monkeypatch.delenv("REPRO_RESUMED_FROM", raising=False)
    monkeypatch.setenv("REPRO_MODE", "strict")
    torch.manual_seed(5)
    first, second = torch.nn.Linear(8, 6), torch.nn.Linear(6, 3, bias=False)
    odd = torch.nn.Parameter(torch.randn(5).bfloat16())  # read by torch
    model = torch.nn.Sequential(first, second)
    model.register_parameter("odd", odd)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    path = tmp_path / "trace.jsonl"
    handle = steptrace.install(torch, path)
    try:
        for step in range(steptrace.SUM_EVERY + 2):
            optimizer.zero_grad()
            (model(torch.randn(4, 8)).sum() + odd.float().sum()).backward()
            optimizer.step()
            if step == steptrace.SUM_EVERY - 1:
                with torch.no_grad():
                    first.bias[0] = float("nan")  # the next row has sums: json.dumps writes it
    finally:
        handle.remove()
        steptrace.flush()
    lines = path.read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["step"] for r in rows] == list(range(steptrace.SUM_EVERY + 2))
    assert all(json.dumps(r) == line for r, line in zip(rows, lines, strict=True))  # json's own text
    assert all(r["f"] == steptrace.SUMMATION for r in rows)
    assert set(rows[0]["params"]) == {"0.weight", "0.bias", "1.weight", "odd"}
    for r in rows:
        sums = [total for total, _ in r["params"].values()]
        taken = r["step"] % steptrace.SUM_EVERY == 0
        assert all((s is not None) == taken for s in sums), r
    assert math.isnan(rows[steptrace.SUM_EVERY]["params"]["0.bias"][0])
    last = rows[-1]["params"]
    assert last["0.bias"][1] == _word_sum(first.bias) and last["odd"][1] == _word_sum(odd)
    assert last["1.weight"][1] == _word_sum(second.weight)


def test_line_templates_escape_names_and_fall_back_where_names_repeat() -> None:
    import json

    names = ['a"b', "c%d", "w%r, %d"]
    with_sums, digests = steptrace._templates(names) or ("", "")
    row = json.loads(with_sums % (3, 1.5, 7, -0.25, 1 << 63, 2.0, 0))
    assert list(row["params"]) == names and row["params"]["c%d"] == [-0.25, 1 << 63]
    assert json.loads(digests % (4, 1, 2, 3))["params"]["w%r, %d"] == [None, 3]
    assert steptrace._templates(["w", "w"]) is None


def test_a_process_resumed_from_a_checkpoint_takes_sums_at_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.setenv("REPRO_RESUMED_FROM", "run-1")
    layer = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    handle = steptrace.install(torch, tmp_path / "trace.jsonl")
    try:
        for _ in range(3):
            optimizer.zero_grad()
            layer(torch.randn(2, 4)).sum().backward()
            optimizer.step()
    finally:
        handle.remove()
        steptrace.flush()
    rows = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert all(total is not None for r in rows for total, _ in r["params"].values())


@pytest.mark.parametrize(
    ("environ", "every"),
    [
        ({}, steptrace.SUM_EVERY),  # strict, the default mode: digests decide
        ({"REPRO_MODE": "strict"}, steptrace.SUM_EVERY),
        ({"REPRO_MODE": "gpu"}, 1),  # a tolerance judges: a sum at every step
        ({"REPRO_MODE": "off"}, 1),
        ({"REPRO_MODE": "strict", "REPRO_RESUMED_FROM": "run-1"}, 1),
    ],
)
def test_sums_are_sparse_only_where_digests_decide(environ: dict[str, str], every: int) -> None:
    assert steptrace.sum_every(environ) == every
