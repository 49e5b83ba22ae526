"""Large data inputs keep their manifest in a blob: the record stays small, replay and diff still
name the files that changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.diff import diff_records
from repro.errors import CapsuleInvalid
from repro.facts import data as data_capture
from repro.facts.data import capture_data, check_data
from repro.store.record import Record, decode_manifest, encode_manifest
from repro.store.recordio import dump_record, load_record
from repro.store.runs import Store
from repro.store.treehash import tree_digest


def _tree(root: Path, n: int) -> None:
    for i in range(n):
        path = root / "data" / f"part{i % 3}" / f"f{i:04d}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{i},{i * i}\n")


def test_a_large_input_is_a_manifest_blob_and_replay_names_the_changed_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data_capture, "MANIFEST_INLINE", 10)
    root = tmp_path / "p"
    _tree(root, 40)
    store = Store(root)
    store.ensure()
    (item,) = capture_data(["data"], root, put_bytes=store.put_bytes)
    assert item.files == [] and item.count == 40 and item.manifest is not None
    entries = item.entries(lambda d: store.blob_path(d).read_bytes())
    assert len(entries) == 40 and tree_digest(entries) == item.digest

    record = Record(id="20260101-000000-abcd", created="2026-01-01T00:00:00+00:00")
    record.data.inputs = [item]
    assert item.manifest in record.blobs()
    assert load_record(dump_record(record)).data.inputs[0].count == 40
    bare = Record(id=record.id, created=record.created)
    grown = len(dump_record(record)) - len(dump_record(bare))
    assert grown < 400  # the record holds a digest and a count, not 40 rows

    read = lambda d: store.blob_path(d).read_bytes()  # noqa: E731
    assert not check_data([item], root, read_blob=read)
    (root / "data" / "part1" / "f0004.csv").write_text("changed\n")
    drift = check_data([item], root, read_blob=read)
    assert drift.changed == ["data/part1/f0004.csv"] and not drift.missing and not drift.extra

    (changed,) = capture_data(["data"], root, put_bytes=store.put_bytes)
    other = Record(id="20260101-000001-abcd", created="2026-01-01T00:00:01+00:00")
    other.data.inputs = [changed]
    result = diff_records(record, other, lambda d: store.blob_path(d).read_bytes())
    section = next(s for s in result.sections if s.name == "data")
    assert any(c.key == "data/part1/f0004.csv" for c in section.changes)


def test_a_manifest_with_a_path_outside_its_root_is_refused() -> None:
    good = encode_manifest([])
    assert decode_manifest(good) == []
    with pytest.raises(CapsuleInvalid, match="unsafe"):
        decode_manifest(b"../../etc/passwd\x0010\x00" + b"0" * 32 + b"\x00")
    with pytest.raises(CapsuleInvalid, match="malformed"):
        decode_manifest(b"data/a.csv\x0010\x00")
