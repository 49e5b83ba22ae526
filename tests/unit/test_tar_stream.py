"""The capsule's tar stream: byte for byte what `tarfile` writes for the same members."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest

from repro.errors import CapsuleInvalid
from repro.store import tarwriter
from repro.store.hashing import hash_bytes
from repro.store.record import FileEntry, Record
from repro.store.runs import Store
from repro.store.tarwriter import pack
from repro.store.verify import verify_tar

NAMES = [
    "capsule.yaml",
    "blobs/" + "ab" * 16,
    "x" * 100,  # the longest name a plain ustar header holds
    "y" * 101,  # longer: a PAX header first
    "données/é.txt",  # not ASCII: a PAX header first
    "a/b c/d\\e",
]


@pytest.mark.parametrize("size", [0, 1, 511, 512, 513, 8**11 - 1, 8**11])
@pytest.mark.parametrize("name", NAMES)
def test_each_header_is_the_one_tarfile_writes(name: str, size: int) -> None:
    expected = tarwriter._tarinfo(name, size).tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape")
    assert tarwriter._header(name, size) == expected


def test_a_stream_of_files_and_bytes_is_the_archive_tarfile_writes(tmp_path: Path) -> None:
    members: list[tuple[str, bytes]] = [
        (n, (n * (i * 97 + 1)).encode()[: i * 700]) for i, n in enumerate(NAMES)
    ]
    members.append(("big.bin", bytes(range(256)) * 9000))  # over one gathered block
    files = {}
    for i, (name, data) in enumerate(members):
        files[name] = tmp_path / f"f{i}"
        files[name].write_bytes(data)
    reference = io.BytesIO()
    with tarfile.open(fileobj=reference, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            tar.addfile(tarwriter._tarinfo(name, len(data)), io.BytesIO(data))
    written = io.BytesIO()
    stream = tarwriter._TarStream(written)
    for i, (name, data) in enumerate(members):
        if i % 2:
            stream.add_bytes(name, data)
        else:
            sha, xxh = stream.add_file(name, files[name], blob=i == 0)
            assert (xxh is not None) == (i == 0) and len(sha) == 64
    stream.close()
    assert written.getvalue() == reference.getvalue()


@pytest.mark.parametrize(
    "size", [0, 1, tarwriter._PROBE - 1, tarwriter._PROBE, tarwriter._PROBE + 1, tarwriter._GATHER + 1]
)
def test_a_blob_of_any_size_is_copied_whole_with_its_digests(tmp_path: Path, size: int) -> None:
    data = bytes(range(251)) * (size // 251) + bytes(size % 251)  # not one repeated block
    path = tmp_path / "blob"
    path.write_bytes(data)
    reference = io.BytesIO()
    with tarfile.open(fileobj=reference, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(tarwriter._tarinfo("blobs/ab/cd", size), io.BytesIO(data))
    written = io.BytesIO()
    stream = tarwriter._TarStream(written)
    sha, xxh = stream.add_file("blobs/ab/cd", path, blob=True)
    stream.close()
    assert written.getvalue() == reference.getvalue()
    assert (sha, xxh) == (hashlib.sha256(data).hexdigest(), hash_bytes(data))


def test_a_file_that_shrinks_while_it_is_copied_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1000)
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real_read(fd, n)[:0])
    with pytest.raises(OSError, match="shrank"):
        tarwriter._TarStream(io.BytesIO()).add_file("f", path, blob=False)


def _sealed_run(tmp_path: Path, outputs: int) -> tuple[Store, Record, list[str]]:
    store = Store(tmp_path)
    record = Record(id="20260101-000000-aaaa", created="2026-01-01T00:00:00+00:00")
    record.command.argv = ["python", "train.py"]
    digests = [store.put_bytes(f"sample {i}\n".encode() * 64) for i in range(outputs)]
    record.results.outputs = [
        FileEntry(f"outputs/sample_{i:05d}.txt", 640 + 64 * len(str(i)), d, stored=True)
        for i, d in enumerate(digests)
    ]
    store.seal(record, store.begin_run(record.id, record.command.argv))
    return store, record, digests


def test_a_capsule_of_many_blobs_is_the_archive_tarfile_writes(tmp_path: Path) -> None:
    store, record, _ = _sealed_run(tmp_path, 300)
    loaded = store.load_run(record.id)
    written = pack(loaded.record, loaded.unchecked_file, tmp_path / "run.tar")
    reference = io.BytesIO()
    with (
        tarfile.open(written) as tar,
        tarfile.open(fileobj=reference, mode="w", format=tarfile.PAX_FORMAT) as ref,
    ):
        for member in tar.getmembers():
            data = tar.extractfile(member).read()  # type: ignore[union-attr]
            ref.addfile(tarwriter._tarinfo(member.name, len(data)), io.BytesIO(data))
    assert written.read_bytes() == reference.getvalue()
    assert verify_tar(written).record.id == record.id


@pytest.mark.parametrize("planted", ["missing", "directory", "fifo"])
def test_a_blob_that_is_not_a_regular_file_is_missing_and_nothing_is_left(
    tmp_path: Path, planted: str
) -> None:
    store, record, digests = _sealed_run(tmp_path, 3)
    loaded = store.load_run(record.id)
    blob = Path(loaded.unchecked_file(digests[1]))
    blob.unlink()
    if planted == "directory":
        blob.mkdir()
    elif planted == "fifo":
        os.mkfifo(blob)  # opening it for reading must not wait for a writer
    out = tmp_path / "out"
    with pytest.raises(CapsuleInvalid, match="missing from the store") as caught:
        pack(loaded.record, loaded.unchecked_file, out / "run.tar")
    assert caught.value.member is not None and digests[1] in caught.value.member
    assert list(out.iterdir()) == []


def test_a_blob_replaced_under_its_name_is_refused(tmp_path: Path) -> None:
    store, record, digests = _sealed_run(tmp_path, 3)
    loaded = store.load_run(record.id)
    blob = Path(loaded.unchecked_file(digests[2]))
    blob.chmod(0o644)
    blob.write_bytes(b"something else entirely")
    with pytest.raises(CapsuleInvalid, match="content-address name"):
        pack(loaded.record, loaded.unchecked_file, tmp_path / "run.tar")
    assert not (tmp_path / "run.tar").exists()


def test_a_blob_read_short_is_refused_by_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, record, _ = _sealed_run(tmp_path, 3)
    loaded = store.load_run(record.id)
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real_read(fd, n)[:-1])  # a read that stops early
    with pytest.raises(CapsuleInvalid, match="content-address name"):
        pack(loaded.record, loaded.unchecked_file, tmp_path / "run.tar")
    assert not (tmp_path / "run.tar").exists()
