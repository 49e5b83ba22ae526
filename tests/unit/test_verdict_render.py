"""Rendering a Verdict as text, JSON and Markdown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from repro.check import CheckResult
from repro.compare.reasons import Code, Reason
from repro.compare.verdict import Known, Verdict, compare_all, compare_runs
from repro.ui import check as check_render
from repro.ui.verdict import WIDTH, render_json, render_markdown, render_text
from tests.builders import side


def _metrics(values: list[float]) -> list[dict[str, Any]]:
    return [{"name": "loss", "value": v, "step": i} for i, v in enumerate(values, start=1)]


@pytest.fixture
def diverged(tmp_path: Path) -> Verdict:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    g = torch.Generator().manual_seed(1)
    sd = {"encoder.layer.0.attention.weight": torch.randn(16, 16, generator=g), "head.bias": torch.zeros(4)}
    torch.save(sd, a / "model.pt")
    torch.save({**sd, "head.bias": torch.tensor([0.0, 0.5, 0.0, 0.0])}, b / "model.pt")
    (a / "report|final.txt").write_text("accuracy 0.91\n")
    (b / "report|final.txt").write_text("accuracy 0.87\n")
    (a / "same.txt").write_text("x")
    (b / "same.txt").write_text("x")
    v = compare_runs(
        side(a, "20240501-aaaa", _metrics([1.0, 0.8, 0.6]), "epoch 1 loss 1.0\nepoch 2 loss 0.8\n"),
        side(b, "20240502-bbbb", _metrics([1.0, 0.8, 0.65]), "epoch 1 loss 1.0\nepoch 2 loss 0.9\n"),
        "gpu",
    )
    v.notes.append("backend changed: docker → local")
    return v


def test_text_has_the_key_facts(diverged: Verdict) -> None:
    text = render_text(diverged, colour=False)
    first, second = text.splitlines()[:2]
    assert first.startswith("DIVERGED") and "20240501-aaaa → 20240502-bbbb" in first and "gpu mode" in first
    assert second == diverged.summary
    for fact in (
        "model.pt",
        "head.bias",
        "0.5",  # its max abs difference
        "report|final.txt",
        "loss at step 3: 0.6 → 0.65",
        "- epoch 2 loss 0.8",
        "+ epoch 2 loss 0.9",
        "backend changed: docker → local",
    ):
        assert fact in text, fact
    assert "same.txt" not in text  # unchanged outputs are counted, not listed
    assert "same.txt" in render_text(diverged, colour=False, show_all=True)
    assert all(len(line) <= WIDTH for line in text.splitlines())
    assert "\033[" not in text


def test_text_identical_is_short(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text("x")
    s = side(tmp_path, "a", _metrics([1.0]), "hi\n")
    text = render_text(compare_runs(s, s, "strict"), colour=False)
    assert text.splitlines()[0].startswith("IDENTICAL") and "bit for bit" in text
    assert "Metrics" not in text and "Stdout" not in text


def test_text_within_tolerance_and_failed(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    np.save(a / "w.npy", np.array([1.0, 2.0], dtype=np.float32))
    np.save(b / "w.npy", np.array([1.0, np.nextafter(np.float32(2.0), np.float32(3.0))], dtype=np.float32))
    v = compare_runs(side(a, "a", [], ""), side(b, "b", [], ""), "gpu")
    assert v.status == "within_tolerance"
    text = render_text(v, colour=False)
    assert text.startswith("WITHIN TOLERANCE") and "2.38e-07" in text and "ok" in text
    failed = compare_runs(side(a, "a", [], ""), side(a, "b", [], "", exit_code=137, status="failed"), "gpu")
    assert render_text(failed, colour=False).startswith("FAILED") and "status 137" in render_text(
        failed, colour=False
    )


def test_json_round_trips(diverged: Verdict) -> None:
    data = render_json(diverged)
    again = json.loads(json.dumps(data, allow_nan=False))
    assert again == data
    assert again["status"] == "diverged" and again["reproduced"] is False
    tensors = next(o for o in again["outputs"] if o["path"] == "model.pt")["tensors"]
    assert tensors["differing"][0]["name"] == "head.bias" and tensors["differing"][0]["max_abs"] == 0.5
    assert again["metrics"]["step"] == 3 and again["stdout"]["line"] == 2
    assert again["tolerance"] == {"atol": 1e-6, "rtol": 1e-5}


def test_markdown_has_a_table(diverged: Verdict) -> None:
    md = render_markdown(diverged)
    lines = md.splitlines()
    assert lines[0] == "### ❌ Not reproduced: diverged"
    assert "|  | check | result | detail |" in lines
    assert "| --- | --- | --- | --- |" in lines
    assert any(line.startswith("| ❌ | metrics | diverged |") for line in lines)
    tensor_row = next(line for line in lines if "`head.bias`" in line)
    assert "| [4] | float32 | 0.5 |" in tensor_row
    assert "report\\|final.txt" in md  # pipes in names are escaped so the table holds
    assert "```diff\n- epoch 2 loss 0.8\n+ epoch 2 loss 0.9\n```" in md
    assert "- backend changed: docker → local" in md
    for line in lines:
        if line.startswith("| "):
            assert line.endswith(" |")


def test_check_renderings_for_n_runs(tmp_path: Path) -> None:
    sides = []
    for i, text in enumerate(["a", "a", "b"]):
        root = tmp_path / str(i)
        root.mkdir()
        (root / "out.txt").write_text(text)
        sides.append(side(root, f"run{i + 1}", [], ""))
    result = CheckResult(kind="repeat", mode="strict", verdicts=compare_all(sides, "strict"))
    md = check_render.render_markdown(result)
    assert md.startswith("## ❌ Not reproduced: diverged")
    assert "| `run2` | `run1` | identical |" in md and "| `run3` | `run1` | diverged |" in md
    assert check_render.render_text(result, colour=False).startswith("DIVERGED  3 runs")
    data = json.loads(json.dumps(check_render.render_json(result)))
    assert data["status"] == "diverged" and len(data["runs"]) == 2
    assert data["exit_code"] == 5 and data["differing_outputs"] == ["out.txt"]


def test_what_the_caller_knows_is_weighed_where_the_verdict_is_decided(tmp_path: Path) -> None:
    """A world size changed: identical bytes are within_tolerance at best; a resume that started over
    diverges whatever the outputs, its reason first."""
    (tmp_path / "out.txt").write_text("x")
    s = side(tmp_path, "a", _metrics([1.0]), "hi\n")
    assert compare_runs(s, s, "strict").status == "identical"
    wider = compare_runs(s, s, "strict", known=Known(world_size_changed=True))
    assert wider.status == "within_tolerance" and wider.reproduced
    assert wider.summary.startswith("within tolerance: 1 output identical, metrics and stdout equal, at ")
    assert "identical:" not in wider.summary and "another world size" in render_text(wider)
    over = Reason(Code.RESUME_STARTED_OVER, "run r2 loaded no checkpoint: it started over")
    restarted = compare_runs(s, s, "gpu", known=Known(started_over=over))
    assert restarted.status == "diverged" and restarted.reasons[0].code == "resume_started_over"
    assert restarted.summary == f"diverged: {over.message}"
    assert json.loads(json.dumps(render_json(restarted)))["reasons"][0]["code"] == "resume_started_over"
