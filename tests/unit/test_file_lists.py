"""Long file lists (code snapshots, outputs) kept as blobs: the record stays small, `ls` never reads
them, show/export/import read them checked, old records with inline lists still load, and a capsule
whose list blob was forged is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from repro.errors import CapsuleInvalid
from repro.store import limits
from repro.store.capsule import RECORD_NAME, SUMS_NAME, blob_member
from repro.store.hashing import hash_bytes
from repro.store.record import CodeInfo, FileEntry, Record
from repro.store.recordio import LIST_INLINE, dump_record, encode_entries, load_record
from repro.store.runs import Store
from repro.store.verify import verify_tar
from tests import forging

RUN_ID = "20260101-000000-abcd"


def _entries(n: int, prefix: str) -> list[FileEntry]:
    return [FileEntry(f"{prefix}/f{i:05d}.txt", i, f"{i:032x}") for i in range(n)]


def _sealed(root: Path, n: int = LIST_INLINE + 1) -> tuple[Store, Record]:
    store = Store(root)
    code = store.put_bytes(b"print('train')\n")
    record = Record(id=RUN_ID, created="2026-01-01T00:00:00+00:00")
    record.command.argv = ["python", "train.py"]
    record.code = CodeInfo(
        kind="snapshot", files=[FileEntry("train.py", 15, code, True), *_entries(n, "src")]
    )
    record.results.outputs = _entries(n, "outputs")
    record.results.status = "succeeded"
    store.seal(record, store.begin_run(RUN_ID, record.command.argv))
    return store, record


def test_long_lists_are_blobs_read_back_by_show_and_never_by_ls(tmp_path: Path) -> None:
    store, record = _sealed(tmp_path)
    raw = (store.runs_dir / RUN_ID / RECORD_NAME).read_bytes()
    assert len(raw) < 8000  # two digests and two counts, not 2,000 rows
    on_disk = yaml.safe_load(raw)
    assert on_disk["code"]["files"] == [] and on_disk["results"]["outputs"] == []
    assert on_disk["lists"]["code.files"]["count"] == LIST_INLINE + 2
    assert set(record.blobs()) >= {ref.blob for ref in record.lists.values()}

    loaded = store.load_run(RUN_ID)
    assert loaded.record.code.files == record.code.files
    assert loaded.record.results.outputs == record.results.outputs
    assert "code.untracked" not in loaded.record.lists  # an empty list stays inline

    (store.dir / "index.sqlite").write_bytes(b"garbage, not a database")
    code_blob = store.blob_path(record.lists["code.files"].blob)
    code_blob.unlink()  # `ls` never reads a code list: its absence changes nothing there
    (row,) = store.rows()
    assert (row.id, row.status, row.command) == (RUN_ID, "succeeded", "python train.py")
    with pytest.raises(CapsuleInvalid, match="code.files"):
        store.load_run(RUN_ID)


def test_ls_with_the_index_gone_reads_no_code_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from repro.store import recordio

    store, record = _sealed(tmp_path)
    read: list[str] = []
    decode = recordio.decode_entries

    def counting(raw: bytes, name: str) -> list[FileEntry]:
        read.append(name)
        return decode(raw, name)

    monkeypatch.setattr(recordio, "decode_entries", counting)
    (store.dir / "index.sqlite").unlink()
    (row,) = store.rows()
    assert row.status == "succeeded" and "code.files" not in read
    assert (store.dir / "index.sqlite").is_file()  # rebuilt, outputs included
    assert store.earlier_writers({"outputs/f00007.txt": f"{7:032x}"}) == {"outputs/f00007.txt": RUN_ID}


def test_a_short_list_stays_inline_and_an_old_inline_record_loads(tmp_path: Path) -> None:
    store, record = _sealed(tmp_path, n=3)
    assert record.lists == {}
    assert len(store.load_run(RUN_ID).record.results.outputs) == 3
    old = Record(id="20250101-000000-abcd", created="2025-01-01T00:00:00+00:00")
    old.results.outputs = _entries(LIST_INLINE + 50, "outputs")
    raw = dump_record(old)  # no store to put blobs in: every list inline, as records used to be
    assert b"lists: {}" in raw
    assert len(load_record(raw).results.outputs) == LIST_INLINE + 50


def test_a_replaced_or_oversized_list_blob_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, record = _sealed(tmp_path)
    path = store.blob_path(record.lists["results.outputs"].blob)
    genuine = path.read_bytes()
    path.write_bytes(genuine.replace(b"outputs/f00001.txt", b"outputs/f00001.tx_"))
    with pytest.raises(CapsuleInvalid, match="does not match its content-address name"):
        store.load_run(RUN_ID)
    path.write_bytes(genuine)
    monkeypatch.setattr(limits, "MAX_LIST_BYTES", len(genuine) - 1)
    with pytest.raises(CapsuleInvalid, match="larger than"):
        store.load_run(RUN_ID)


def test_export_carries_the_list_blobs_and_import_reads_them(tmp_path: Path) -> None:
    store, record = _sealed(tmp_path / "a")
    (store.root / "train.py").write_text("print('train')\n")
    loaded = store.load_run(RUN_ID)
    from repro.store.tarwriter import pack

    tar = pack(loaded.record, loaded.blob_path, tmp_path / "run.tar")
    verified = verify_tar(tar)
    assert {blob_member(ref.blob) for ref in record.lists.values()} <= set(verified.members)
    assert verified.record.results.outputs == record.results.outputs  # read in place, not extracted
    other = Store(tmp_path / "b")
    imported = other.import_run(other.open_capsule(tar))
    assert imported.record.code.files == record.code.files
    assert other.import_run(other.open_capsule(tar)).record.id == RUN_ID  # the same record: idempotent


def _forged_list(tar: Path, dest: Path, rows: object, count: int | None = None) -> Path:
    """The capsule with its outputs list replaced by ``rows``, renamed and re-summed as anyone can."""
    members = forging.members(tar)
    members.pop(SUMS_NAME)
    data = yaml.safe_load(members[RECORD_NAME])
    ref = data["lists"]["results.outputs"]
    members.pop(blob_member(ref["blob"]))
    raw = json.dumps(rows).encode()
    ref["blob"] = hash_bytes(raw)
    if count is not None:
        ref["count"] = count
    members[blob_member(ref["blob"])] = raw
    members[RECORD_NAME] = yaml.safe_dump(data, sort_keys=False).encode()
    return forging.write(dest, members)


@pytest.mark.parametrize(
    ("rows", "count", "message"),
    [
        ([["../../etc/passwd", 1, "a" * 32, False, None]], 1, "results.outputs"),
        ([["/root/.ssh/authorized_keys", 1, "a" * 32, True, None]], 1, "results.outputs"),
        ([["outputs/a", "1", "a" * 32, False, None]], 1, "malformed entry"),
        ({"not": "a list"}, 1, "not a list"),
        ([["outputs/a", 1, "a" * 32, False, None]], 5, "holds 1 entries, not 5"),
    ],
)
def test_a_forged_list_blob_in_a_capsule_is_refused(
    tmp_path: Path, rows: object, count: int, message: str
) -> None:
    store, _ = _sealed(tmp_path / "a")
    loaded = store.load_run(RUN_ID)
    from repro.store.tarwriter import pack

    tar = pack(loaded.record, loaded.blob_path, tmp_path / "run.tar")
    bad = _forged_list(tar, tmp_path / "bad.tar", rows, count)
    with pytest.raises(CapsuleInvalid, match=message):
        verify_tar(bad)
    with pytest.raises(CapsuleInvalid, match=message):
        Store(tmp_path / "b").open_capsule(bad)


def test_an_unknown_list_name_is_refused(tmp_path: Path) -> None:
    record = Record(id=RUN_ID, created="2026-01-01T00:00:00+00:00")
    data = yaml.safe_load(dump_record(record))
    data["lists"] = {"deps.lockfile": {"blob": "a" * 32, "count": 1}}
    with pytest.raises(CapsuleInvalid, match="unknown list"):
        load_record(yaml.safe_dump(data).encode())
    assert limits.MAX_LIST_BYTES >= 100 << 20  # a 1M-file snapshot list fits


def test_a_list_blob_is_the_same_bytes_for_the_same_list() -> None:
    assert encode_entries(_entries(3, "x")) == encode_entries(_entries(3, "x"))


def test_show_counts_a_code_list_it_does_not_read(tmp_path: Path) -> None:
    from repro.ui.records import show_text

    store, record = _sealed(tmp_path)
    store.blob_path(record.lists["code.files"].blob).unlink()
    loaded = store.resolve("latest", lists=("results.outputs",))
    assert loaded.record.code.files == [] and loaded.record.listed("code.files") == LIST_INLINE + 2
    text = show_text(loaded.record, None)
    assert f"snapshot of {LIST_INLINE + 2:,} files" in text or f"snapshot of {LIST_INLINE + 2} files" in text
    assert "outputs/f00000.txt" in text


def test_earlier_writers_name_the_latest_run_that_wrote_the_same_bytes(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for run_id, digest in (("20260101-000000-aaaa", "a" * 32), ("20260102-000000-aaaa", "a" * 32)):
        record = Record(id=run_id, created="2026-01-01T00:00:00+00:00")
        record.results.outputs = [*_entries(1200, "outputs"), FileEntry("model.pt", 1, digest)]
        store.seal(record, store.begin_run(run_id, ["python", "t.py"]))
    files = {f"outputs/f{i:05d}.txt": f"{i:032x}" for i in range(1200)}
    files |= {"model.pt": "a" * 32, "outputs/f00003.txt": "b" * 32, "other.py": "c" * 32}
    found = store.earlier_writers(files)
    assert found["model.pt"] == "20260102-000000-aaaa" and len(found) == 1200
    assert "outputs/f00003.txt" not in found and "other.py" not in found
