"""The output comparators' registry: tried in order, first result wins, the byte comparison last."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.compare import comparators
from repro.compare.comparators import COMPARATORS, Pair, Result, compare_pair, register
from repro.compare.outputs import Outputs, compare_outputs
from repro.compare.tolerance import Tolerance
from repro.store.record import FileEntry


def _side(tmp_path: Path, label: str, name: str, data: bytes) -> Outputs:
    root = tmp_path / label
    root.mkdir()
    (root / name).write_bytes(data)
    entry = FileEntry(path=name, hash=label * 8, size=len(data))
    return Outputs(label, [entry], lambda e: root / e.path)


class _Upper:
    """Claims ``.up`` files; equal when they are equal ignoring case, declines an empty file."""

    name = "upper"

    def claims(self, path: str) -> bool:
        return path.endswith(".up")

    def compare(self, pair: Pair) -> Result | None:
        opened = pair.open()
        assert not isinstance(opened, str)
        a, b = (p.read_bytes() for p in opened)
        if not a:
            return None
        return Result("same" if a.upper() == b.upper() else "changed", "file", "equal ignoring case")


def test_the_order_is_tensors_tables_stamps_then_bytes() -> None:
    assert [c.name for c in COMPARATORS] == ["tensors", "table", "stamps", "bytes"]
    assert all(COMPARATORS[-1].claims(p) for p in ("a.log", "x", "m.pt"))


def test_a_registered_comparator_is_tried_before_the_bytes_and_may_decline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(comparators, "COMPARATORS", list(COMPARATORS))
    register(_Upper())
    assert [c.name for c in comparators.COMPARATORS][-2:] == ["upper", "bytes"]
    with pytest.raises(ValueError, match="registered already"):
        register(_Upper())
    (d,) = compare_outputs(
        _side(tmp_path, "a", "w.up", b"abc"), _side(tmp_path, "b", "w.up", b"ABC"), Tolerance()
    )
    assert (d.status, d.kind, d.note) == ("same", "file", "equal ignoring case")
    (e,) = compare_outputs(_side(tmp_path, "c", "e.up", b""), _side(tmp_path, "d", "e.up", b"x"), Tolerance())
    assert (e.status, e.note) == ("changed", "not a format compared by content")  # declined: the bytes decide


def test_a_file_no_comparator_knows_is_changed_by_its_bytes(tmp_path: Path) -> None:
    a, b = FileEntry(path="notes.log", hash="1", size=1), FileEntry(path="notes.log", hash="2", size=1)
    found = compare_pair(Pair("notes.log", a, b, lambda: "never opened", Tolerance()))
    assert (found.status, found.kind) == ("changed", "file")
