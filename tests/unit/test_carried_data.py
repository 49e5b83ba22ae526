"""Data carried in a capsule (`repro export --with-data`): blobs checked by `verify`, placed read-only in
a replay's copy only at safe paths and only with the bytes the manifest names; where a replay finds each
input (`locate_inputs`); the size guard."""

from __future__ import annotations

import os
import stat
import tarfile
from pathlib import Path

import pytest

from repro.errors import CapsuleInvalid, UsageError
from repro.export import carried_data
from repro.rerun.inputs import CAPSULE, DATA_REMOTE, DVC, HERE, NOWHERE, STORE, locate_inputs
from repro.store import datablobs, limits
from repro.store.capsule import SUMS_NAME, blob_member
from repro.store.hashing import hash_bytes
from repro.store.record import CodeInfo, CommandInfo, DataInput, DvcSource, FileEntry, Record
from repro.store.runs import LoadedRun, Store
from repro.store.tarwriter import pack
from repro.store.treehash import hash_tree
from repro.store.verify import verify_tar
from tests import forging
from tests.conftest import Cli

CODE = b"print('train')\n"
SAMPLES = {"data/train/cat/0.txt": b"1.0 -1.0\n", "data/train/dog/0.txt": b"-1.0 1.0\n"}


def _project(tmp_path: Path) -> tuple[Store, Record]:
    """A project with a data folder and the record of a run that declared it (its code in the store)."""
    root = tmp_path / "proj"
    for rel, body in SAMPLES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(body)
    store = Store(root)
    store.ensure()
    tree = hash_tree(root / "data", root)
    record = Record(id="20260101-000000-abcd", created="2026-01-01T00:00:00+00:00")
    record.command = CommandInfo(argv=["python", "train.py"], cwd=".")
    record.code = CodeInfo(
        kind="snapshot", files=[FileEntry("train.py", len(CODE), store.put_bytes(CODE), True)]
    )
    record.data.inputs = [DataInput("data", tree.digest, tree.size, tree.files, count=len(tree.files))]
    return store, record


def _capsule(tmp_path: Path) -> tuple[Path, Store, Record]:
    store, record = _project(tmp_path)
    loaded = LoadedRun(record, store.dir, store.dir)
    data = carried_data(loaded, store, None, limits.MAX_DATA_BYTES)
    assert data.files == 2 and data.size == sum(len(b) for b in SAMPLES.values())
    tar = pack(record, store.blob_path, tmp_path / "run.tar", data=data.blobs)
    return tar, store, record


def test_carried_data_blobs_are_listed_in_sha256sums_and_verified(tmp_path: Path) -> None:
    tar, _, record = _capsule(tmp_path)
    verified = verify_tar(tar)
    for body in SAMPLES.values():
        assert blob_member(hash_bytes(body)) in verified.members
        assert f"  {blob_member(hash_bytes(body))}" in verified.sums.decode()
    assert blob_member(record.code.files[0].hash) in verified.members


def test_a_tampered_data_blob_with_recomputed_sums_is_refused_by_verify_with_exit_6(
    tmp_path: Path, cli: Cli
) -> None:
    tar, _, _ = _capsule(tmp_path)
    member = blob_member(hash_bytes(SAMPLES["data/train/cat/0.txt"]))
    found = forging.members(tar)
    found.pop(SUMS_NAME)
    found[member] = b"9.0 9.0\n"  # poisoned sample, SHA256SUMS recomputed as anyone can
    bad = forging.write(tmp_path / "tampered.tar", found)
    r = cli("verify", str(bad))
    assert r.code == 6
    assert "does not match its content-address name" in r.err


@pytest.mark.parametrize("name", ["../evil.txt", "/etc/cron.d/evil", "blobs/../../evil", "data/../../x"])
def test_hostile_member_names_are_refused(tmp_path: Path, name: str) -> None:
    tar, _, _ = _capsule(tmp_path)
    found = forging.members(tar)
    found.pop(SUMS_NAME)
    found[name] = b"x"
    with pytest.raises(CapsuleInvalid, match="escapes the capsule"):
        verify_tar(forging.write(tmp_path / "named.tar", found), extract_to=tmp_path / "out")
    assert not (tmp_path / "evil.txt").exists()


def test_a_link_member_is_refused(tmp_path: Path) -> None:
    tar, _, _ = _capsule(tmp_path)
    linked = tmp_path / "linked.tar"
    with tarfile.open(tar) as src, tarfile.open(linked, "w") as out:
        for info in src:
            out.addfile(info, src.extractfile(info))
        link = tarfile.TarInfo("blobs/aa/data-link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        out.addfile(link)
    with pytest.raises(CapsuleInvalid, match="is a link"):
        verify_tar(linked)


def _entries(record: Record) -> tuple[DataInput, list[FileEntry]]:
    item = record.data.inputs[0]
    return item, item.files


def test_placing_writes_read_only_files_checked_against_the_manifest(tmp_path: Path) -> None:
    store, record = _project(tmp_path)
    item, files = _entries(record)
    for f in files:
        datablobs.put(store.root / f.path, f.hash, store.dir)
    dest = tmp_path / "scratch"
    dest.mkdir()
    placed = datablobs.place(files, dest, lambda e: store.blob_path(e.hash), limits.MAX_DATA_BYTES)
    assert placed == sum(len(b) for b in SAMPLES.values())
    for rel, body in SAMPLES.items():
        assert (dest / rel).read_bytes() == body
        assert not stat.S_IMODE((dest / rel).stat().st_mode) & 0o222
    assert hash_tree(dest / item.path, dest).digest == item.digest


def test_placing_refuses_bytes_that_differ_from_the_manifest(tmp_path: Path) -> None:
    _, record = _project(tmp_path)
    _, files = _entries(record)
    wrong = tmp_path / "wrong"
    wrong.write_bytes(b"not the sample\n")
    dest = tmp_path / "scratch"
    dest.mkdir()
    with pytest.raises(CapsuleInvalid, match="does not match its recorded hash"):
        datablobs.place(files, dest, lambda e: wrong, limits.MAX_DATA_BYTES)
    assert not any(p.is_file() for p in dest.rglob("*"))  # nothing half-placed under its name


def test_placing_never_writes_through_a_link_in_the_replays_copy(tmp_path: Path) -> None:
    store, record = _project(tmp_path)
    _, files = _entries(record)
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "scratch"
    (dest / "data").mkdir(parents=True)
    (dest / "data" / "train").symlink_to(outside)  # restored code that points the data elsewhere
    with pytest.raises(CapsuleInvalid, match="passes through a link"):
        datablobs.place(files, dest, lambda e: store.root / e.path, limits.MAX_DATA_BYTES)
    with pytest.raises(CapsuleInvalid, match="passes through a link"):
        datablobs.clear(dest, "data/train/cat")
    assert list(outside.iterdir()) == []


def test_placing_refuses_a_file_already_there_and_data_over_the_limit(tmp_path: Path) -> None:
    store, record = _project(tmp_path)
    _, files = _entries(record)
    dest = tmp_path / "scratch"
    (dest / "data" / "train" / "cat").mkdir(parents=True)
    (dest / "data" / "train" / "cat" / "0.txt").write_text("kept")
    with pytest.raises(CapsuleInvalid, match="already taken"):
        datablobs.place(files, dest, lambda e: store.root / e.path, limits.MAX_DATA_BYTES)
    assert (dest / "data" / "train" / "cat" / "0.txt").read_text() == "kept"
    with pytest.raises(CapsuleInvalid, match="over the limit"):
        datablobs.place(files, tmp_path, lambda e: store.root / e.path, 4)


@pytest.mark.parametrize(
    ("input_path", "file_path", "why"),
    [
        ("data", "other/secret.txt", "outside it"),
        ("data", "data/../etc/passwd", "outside it"),
        ("/etc", "/etc/passwd", "not a relative path"),
        ("../up", "../up/x", "not a relative path"),
    ],
)
def test_a_record_naming_data_outside_its_input_is_refused(input_path: str, file_path: str, why: str) -> None:
    item = DataInput(input_path, "d" * 32, 1, [FileEntry(file_path, 1, "e" * 32)])
    with pytest.raises(CapsuleInvalid, match=why):
        datablobs.safe_entries(item, item.files)


def test_a_link_entry_is_refused() -> None:
    item = DataInput("data", "d" * 32, 1, [FileEntry("data/x", 0, "e" * 32, link="/etc/passwd")])
    with pytest.raises(CapsuleInvalid, match="names a link"):
        datablobs.safe_entries(item, item.files)


def test_locate_inputs_says_here_capsule_store_remote_or_nowhere(tmp_path: Path) -> None:
    store, record = _project(tmp_path)
    remote = tmp_path / "remote"
    capsule = tmp_path / "capsule"
    nothing = datablobs.BlobRoots((("store", store.dir),))
    [here] = locate_inputs(record, store.root, nothing, store.read_blob)
    assert here.kind == HERE and here.files == 2
    for rel in SAMPLES:
        os.remove(store.root / rel)
    [gone] = locate_inputs(record, store.root, nothing, store.read_blob)
    assert gone.kind == NOWHERE and gone.present and len(gone.missing) == 2
    assert f"repro export {record.id} --with-data" in gone.describe()
    for rel, body in SAMPLES.items():
        datablobs.put(_written(tmp_path / "src" / rel, body), hash_bytes(body), remote)
    roots = datablobs.BlobRoots((("capsule", capsule), ("store", store.dir), ("data_remote", remote)))
    [far] = locate_inputs(record, store.root, roots, store.read_blob)
    assert far.kind == DATA_REMOTE and far.location == str(remote)
    assert "in the data remote" in far.describe()
    for f in record.data.inputs[0].files:
        datablobs.put(remote / blob_member(f.hash), f.hash, store.dir)  # a hard link between blob dirs
        assert (store.dir / blob_member(f.hash)).stat().st_ino == (remote / blob_member(f.hash)).stat().st_ino
    assert locate_inputs(record, store.root, roots, store.read_blob)[0].kind == STORE
    for f in record.data.inputs[0].files:
        datablobs.put(remote / blob_member(f.hash), f.hash, capsule)
    assert locate_inputs(record, store.root, roots, store.read_blob)[0].kind == CAPSULE


def test_an_input_dvc_tracks_and_no_blob_holds_is_found_in_its_dvc_remote(tmp_path: Path) -> None:
    store, record = _project(tmp_path)
    for rel in SAMPLES:
        os.remove(store.root / rel)
    record.data.inputs[0].dvc = [DvcSource("data.dvc", "data", "md5", "a" * 32 + ".dir", remote="store")]
    nothing = datablobs.BlobRoots((("store", store.dir),))
    [fetched] = locate_inputs(record, store.root, nothing, store.read_blob)
    assert fetched.kind == DVC and fetched.remote == "store"
    assert "in the DVC remote `store`, fetched through DVC" in fetched.describe()
    for rel, body in SAMPLES.items():  # blobs at hand come first: no fetch needed
        datablobs.put(_written(tmp_path / "src" / rel, body), hash_bytes(body), store.dir)
    assert locate_inputs(record, store.root, nothing, store.read_blob)[0].kind == STORE


def _written(path: Path, body: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    return path


def test_a_blob_is_never_kept_under_a_name_its_bytes_do_not_match(tmp_path: Path) -> None:
    source = _written(tmp_path / "sample.txt", b"changed since it was recorded\n")
    with pytest.raises(CapsuleInvalid, match="does not match"):
        datablobs.put(source, hash_bytes(b"what was recorded\n"), tmp_path / "remote")
    assert not [p for p in (tmp_path / "remote").rglob("*") if p.is_file()]


def test_export_with_data_over_the_limit_is_refused_with_the_flag_to_raise_it(tmp_path: Path) -> None:
    store, record = _project(tmp_path)
    with pytest.raises(UsageError, match="over the limit") as caught:
        carried_data(LoadedRun(record, store.dir, store.dir), store, None, 4)
    assert caught.value.hint is not None and "--max-data-size" in caught.value.hint


def test_export_with_data_refuses_data_that_changed_since_the_run(tmp_path: Path) -> None:
    store, record = _project(tmp_path)
    (store.root / "data/train/cat/0.txt").write_text("changed\n")
    with pytest.raises(UsageError, match="not here as recorded"):
        carried_data(LoadedRun(record, store.dir, store.dir), store, None, limits.MAX_DATA_BYTES)


@pytest.mark.parametrize(
    ("text", "size"),
    [("2147483648", 2 << 30), ("2GiB", 2 << 30), ("500MiB", 500 << 20), ("4g", 4 << 30), ("12 kb", 12 << 10)],
)
def test_sizes_are_read_in_bytes_or_binary_units(text: str, size: int) -> None:
    assert limits.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "-1", "1.5GiB", "2 PB"])
def test_unreadable_sizes_are_none(text: str) -> None:
    assert limits.parse_size(text) is None


def test_export_with_data_of_a_run_without_declared_data_says_there_is_nothing_to_carry(
    tmp_path: Path,
) -> None:
    store, record = _project(tmp_path)
    record.data.inputs = []
    with pytest.raises(UsageError, match="declared no data"):
        carried_data(LoadedRun(record, store.dir, store.dir), store, None, limits.MAX_DATA_BYTES)


def test_the_hosts_copy_is_hashed_once_to_choose_and_to_judge_drift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An input kept nowhere whose host copy differs: one hash of it says where it comes from (nowhere)
    and what drifted (the file changed)."""
    from repro.facts import data as facts_data
    from repro.rerun import inputs
    from repro.rerun.request import ReplayRequest

    store, record = _project(tmp_path)
    (store.root / "data/train/cat/0.txt").write_bytes(b"9.0 9.0\n")
    calls: list[Path] = []

    def counted(path: Path, *args: object, **kwargs: object) -> object:
        calls.append(path)
        return hash_tree(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(inputs, "hash_tree", counted)
    monkeypatch.setattr(facts_data, "hash_tree", counted)
    roots = datablobs.BlobRoots((("store", store.dir),))
    request = ReplayRequest(ref=record.id, allow_data_drift=True)
    choice = inputs.choose_data(record, store.root, store, roots, request, store.read_blob)
    assert [s.kind for s in choice.sources] == [NOWHERE]
    assert choice.drift is not None and choice.drift.changed == ["data/train/cat/0.txt"]
    assert calls == [store.root / "data"]
