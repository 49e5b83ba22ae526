"""A checkpoint that only a full unpickling reads (DLRM's `torch.save` of its model and argparse args) is
compared by what it holds in the container sandbox, or by bytes with the reason when no sandbox can;
never unpickled in repro's process, never called unreadable, and no terminal code reaches JSON."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from repro.compare import tensors
from repro.compare.outputs import Outputs, compare_outputs
from repro.compare.tolerance import STRICT
from repro.errors import SandboxUnavailable
from repro.store.record import FileEntry

torch = pytest.importorskip("torch")


def dlrm_save(path: Path, seed: int) -> Path:
    """As DLRM saves it: the whole model object and its argparse namespace, which weights_only refuses."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    torch.save({"state_dict": model, "args": argparse.Namespace(arch_mlp_bot="4-3-1")}, path)
    return path


def _outputs(tmp_path: Path) -> list[object]:
    a, b = dlrm_save(tmp_path / "a.pt", 0), dlrm_save(tmp_path / "b.pt", 1)
    side_a = Outputs("a", [FileEntry(path="model.pt", size=1, hash="ha")], lambda e: a)
    side_b = Outputs("b", [FileEntry(path="model.pt", size=1, hash="hb")], lambda e: b)
    return list(compare_outputs(side_a, side_b, STRICT))


def test_with_no_sandbox_it_is_compared_by_bytes_and_the_verdict_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tensors, "_UNPICKLERS", [])
    (d,) = _outputs(tmp_path)
    assert d.status == "changed" and d.tensors is None  # type: ignore[attr-defined]
    assert d.note == (  # type: ignore[attr-defined]
        "compared by bytes: it needs weights_only=False, and unpickling runs its code; "
        "no container engine answers to load them sandboxed"
    )


def test_a_sandbox_that_cannot_load_them_is_named_and_one_that_can_gives_the_tensors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuses(a: Path, b: Path, images: object) -> tuple[Path, Path]:
        raise SandboxUnavailable("no local image has torch to load them in the container sandbox")

    monkeypatch.setattr(tensors, "_UNPICKLERS", [refuses])
    (d,) = _outputs(tmp_path)
    assert d.note.endswith("no local image has torch to load them in the container sandbox")  # type: ignore[attr-defined]

    def plain_copies(a: Path, b: Path, images: object) -> tuple[Path, Path]:
        """What the sandbox hands back: plain tensors (here made from the seeds, not by unpickling)."""
        scratch = tmp_path / "scratch"
        scratch.mkdir()
        for name, seed in (("a", 0), ("b", 1)):
            torch.manual_seed(seed)
            model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
            torch.save({"state_dict": model.state_dict(), "args": {"arch_mlp_bot": "4-3-1"}}, scratch / name)
        return scratch / "a", scratch / "b"

    monkeypatch.setattr(tensors, "_UNPICKLERS", [plain_copies])
    (d,) = _outputs(tmp_path)
    report = d.tensors  # type: ignore[attr-defined]
    assert report is not None and d.note is None  # type: ignore[attr-defined]
    assert {t.name for t in report.differing} == {
        "state_dict.0.weight", "state_dict.0.bias", "state_dict.2.weight", "state_dict.2.bias"
    }  # fmt: skip
    assert not (tmp_path / "scratch").exists()  # the sandbox's scratch directory is removed


def test_torch_s_bold_message_reaches_no_reason_or_json_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch bolds part of its weights_only error with ANSI codes: a reason repro writes carries none."""
    try:
        torch.load(io.BytesIO(_pickled_module()), weights_only=True)
    except Exception as e:
        assert "\x1b[" in str(e)
    path = tmp_path / "broken.pt"
    path.write_bytes(_pickled_module()[:-40])  # a torn write, as two ranks racing leave it
    with pytest.raises(tensors.UnreadableTensorFile) as caught:
        tensors.load_tensors(path)
    assert "\x1b" not in caught.value.reason
    monkeypatch.setattr(tensors, "_UNPICKLERS", [])
    (d,) = _outputs(tmp_path)
    text = json.dumps({"note": d.note})  # type: ignore[attr-defined]
    assert "\\u001b" not in text and "\x1b" not in text


def _pickled_module() -> bytes:
    buffer = io.BytesIO()
    torch.save(torch.nn.Linear(2, 2), buffer)
    return buffer.getvalue()
