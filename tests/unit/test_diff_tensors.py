"""`repro diff` on a changed tensor file: the tensors that differ, largest first, and the unchanged count."""

from __future__ import annotations

import math

from repro.compare.outputs import OutputDiff
from repro.compare.tensors import TensorDiff, TensorMismatch, TensorReport
from repro.diff.model import Section
from repro.diff.output_sections import _output_change
from repro.ui.diff import _Painter, _section_text


def _diff(name: str, max_abs: float) -> TensorDiff:
    return TensorDiff(name, [4], "torch.float32", max_abs, max_abs / 2, 1, 4, False)


def _changed(report: TensorReport) -> OutputDiff:
    return OutputDiff("model.pt", "changed", "a", "b", 100, 100, tensors=report, kind="tensors")


def test_differing_tensors_come_largest_first_then_structural_ones_with_the_unchanged_count() -> None:
    report = TensorReport(
        compared=6, identical=2,
        differing=[_diff("fc1.weight", 1e-3), _diff("fc2.bias", 0.5), _diff("emb", math.nan)],
        mismatched=[TensorMismatch("head.weight", "shape", "[2, 4]", "[3, 4]")],
        only_replay=["extra"],
    )  # fmt: skip
    change = _output_change(_changed(report))
    assert change.tensors is not None
    assert [(t.name, t.kind) for t in change.tensors.differing] == [
        ("emb", "value"), ("fc2.bias", "value"), ("fc1.weight", "value"), ("head.weight", "shape"),
        ("extra", "only_b"),
    ]  # fmt: skip
    assert change.tensors.unchanged == 2
    assert change.detail == "5 tensors differ, first: emb (max abs nan); 2 unchanged"
    data = change.to_dict()["tensors"]
    assert data["differing"][1] == {
        "name": "fc2.bias", "kind": "value", "max_abs": 0.5, "max_rel": 0.25, "a": None, "b": None
    }  # fmt: skip
    assert data["differing"][0]["max_abs"] == "nan" and data["unchanged"] == 2

    lines = _section_text(Section("outputs", "Outputs", [change], "1 file changed"), _Painter(False))
    assert lines[1].split()[:2] == ["~", "model.pt"]
    assert lines[3].split() == ["fc2.bias", "max", "abs", "0.5,", "max", "rel", "0.25"]
    assert lines[5].split() == ["head.weight", "shape", "[2,", "4]", "→", "[3,", "4]"]
    assert lines[6].split() == ["extra", "only", "in", "B"]


def test_a_file_whose_tensors_are_all_equal_says_so_and_an_unreadable_one_says_why() -> None:
    equal = _output_change(_changed(TensorReport(compared=3, identical=3)))
    assert equal.detail == "other bytes, all 3 tensors equal"
    broken = _output_change(
        OutputDiff("model.pt", "changed", "a", "b", 1, 2, note="unreadable: truncated", kind="tensors")
    )
    assert broken.tensors is None and broken.detail == "unreadable: truncated"
