"""The `--trace` fingerprints inside the training process: values, one transfer, buffered lines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from repro.compare import trace
from repro.runtime import jsonl, steptrace


def _old_fingerprint(x: torch.Tensor) -> list[float]:
    """What the trace recorded before: a float64 copy, then its sums (older records hold these)."""
    d = x.detach().double()
    return [d.sum().item(), d.abs().sum().item()]


def test_fingerprints_are_float64_sums_the_same_bits_every_time() -> None:
    torch.manual_seed(3)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3), torch.nn.Flatten(), torch.nn.Linear(16 * 30 * 30, 10)
    )
    tensors = [*model.parameters(), torch.randn(4_000_001), torch.randn(64, 64).t(), torch.randn(8).double()]
    found = steptrace.fingerprints(torch, tensors)
    assert found == steptrace.fingerprints(torch, [t.clone() for t in tensors])
    for (total, absolute), x in zip(found, tensors, strict=True):
        old = _old_fingerprint(x)
        assert total == pytest.approx(old[0], rel=1e-9, abs=1e-9) and absolute == pytest.approx(
            old[1], rel=1e-12
        )
    assert steptrace.fingerprints(torch, []) == []


def test_one_changed_bit_of_one_weight_changes_the_fingerprint() -> None:
    torch.manual_seed(4)
    x = torch.randn(1_000_000)
    before = steptrace.fingerprints(torch, [x])
    x[123_456] = torch.nextafter(x[123_456], torch.tensor(float("inf")))  # one float32 ulp
    assert steptrace.fingerprints(torch, [x]) != before  # float64 accumulation keeps it


def test_tensors_numpy_cannot_read_are_summed_by_torch_in_order() -> None:
    tensors = [torch.randn(100), torch.randn(50).bfloat16(), torch.randn(7), torch.randn(3).half()]
    found = steptrace.fingerprints(torch, tensors)
    assert found[1] == _old_fingerprint(tensors[1]) and found[3] == _old_fingerprint(tensors[3])
    assert found[0] == pytest.approx(_old_fingerprint(tensors[0]), rel=1e-9)


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
    monkeypatch.setattr("repro.runtime.jsonl.time.monotonic", lambda: 1e18)
    appender = jsonl.Appender(
        "trace", path=str(path), flush_seconds=steptrace.FLUSH_SECONDS, flush_bytes=steptrace.FLUSH_BYTES
    )
    monkeypatch.setattr(steptrace, "_appender", [appender])
    return appender


def test_lines_are_buffered_then_written_whole_and_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "trace.jsonl"
    appender = _trace_appender(path, monkeypatch)  # within the second: held
    for step in range(3):
        appender.write({"step": step, "params": {"w": [1.5, 2.5]}})
    assert not path.exists()
    steptrace.flush()
    rows = trace.parse(path.read_text())
    assert [r["step"] for r in rows] == [0, 1, 2] and rows[0]["params"] == {"w": [1.5, 2.5]}
    monkeypatch.setattr("repro.runtime.jsonl.time.monotonic", lambda: 2e18)  # a second later: written at once
    appender.write({"step": 3, "params": {}})
    assert len(trace.parse(path.read_text())) == 4


def test_a_forked_child_does_not_write_the_parents_lines_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "trace.jsonl"
    _trace_appender(path, monkeypatch).write({"step": 0})
    pid = os.fork()
    if pid == 0:  # what a DataLoader worker gets
        steptrace.flush()
        os._exit(0)
    os.waitpid(pid, 0)
    assert not path.exists()
    steptrace.flush()
    assert path.read_text() == '{"step": 0}\n'
