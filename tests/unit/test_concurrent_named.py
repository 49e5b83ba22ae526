"""An output several processes wrote at once, torn so that it no longer loads: every view names the
writers, not "unreadable" alone (replay verdict in text and Markdown, `repro diff`)."""

from __future__ import annotations

from pathlib import Path

import torch

from repro.compare.reasons import Code
from repro.compare.verdict import Side, compare_runs
from repro.diff.output_sections import _output_change
from repro.store.record import FileEntry, SharedWrite
from repro.ui.verdict import render_markdown, render_text


def _torn(tmp_path: Path) -> tuple[Path, Path]:
    """Rank 0's and rank 1's saves of one model.pt interleaved, as two concurrent writes leave it."""
    whole = tmp_path / "whole.pt"
    torch.save({"w": torch.arange(4096, dtype=torch.float32)}, whole)
    other = tmp_path / "other.pt"
    torch.save({"w": torch.zeros(4096), "rank": 1}, other)
    a, b = whole.read_bytes(), other.read_bytes()
    torn = tmp_path / "torn.pt"
    torn.write_bytes(b[: len(b) // 2] + a[len(b) // 2 :])
    return whole, torn


def _side(path: Path, shared: list[SharedWrite]) -> Side:
    entry = FileEntry(path="model.pt", hash=path.name, size=path.stat().st_size)
    return Side("r", [entry], lambda e: path, [], "", shared_writes=shared)


def test_a_torn_torch_file_two_ranks_wrote_is_named_by_its_writers(tmp_path: Path) -> None:
    whole, torn = _torn(tmp_path)
    shared = [SharedWrite("model.pt", [0, 1], [41, 42])]
    v = compare_runs(_side(whole, shared), _side(torn, shared), "strict")
    (o,) = v.outputs
    assert o.note is not None and o.note.startswith("unreadable")  # torch cannot load it
    (reason,) = v.reasons
    assert reason.code == Code.CONCURRENT_WRITE and reason.fields["ranks"] == [0, 1]
    assert v.summary == (
        "diverged: output model.pt was written by ranks 0 and 1 at once: its bytes depend on which wrote last"
    )
    line = render_text(v, colour=False).splitlines()[-1]
    assert "written by ranks 0 and 1 at once; bytes differ (unreadable" in line
    assert "written by ranks 0 and 1 at once" in render_markdown(v)

    change = _output_change(o, "ranks 0 and 1")
    assert change.detail is not None and change.detail.startswith(
        "written by ranks 0 and 1 at once; unreadable"
    )
