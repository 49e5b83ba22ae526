from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from repro.errors import CapsuleInvalid
from repro.store.capsule import blob_member
from repro.store.hashing import hash_bytes
from repro.store.record import FileEntry, Record
from repro.store.recordio import dump_record, load_record
from repro.store.tarwriter import pack
from repro.store.verify import verify_tar


def _record_with_blob(tmp_path: Path) -> tuple[Record, Path]:
    blobs = tmp_path / "store"
    data = b"weights" * 100
    digest = hash_bytes(data)
    path = blobs / blob_member(digest)
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    record = Record(id="20260101-000000-abcd", created="2026-01-01T00:00:00+00:00")
    record.results.outputs = [FileEntry("outputs/model.pt", len(data), digest, True)]
    record.command.params = {"lr": 0.1}
    return record, blobs


def test_record_round_trips_through_yaml() -> None:
    r = Record(id="x", created="now")
    r.command.argv = ["python", "t.py"]
    r.results.outputs = [FileEntry("a", 1, "h", True)]
    back = load_record(dump_record(r))
    assert back == r
    assert dump_record(r).startswith(b"format: repro.capsule/v1")


def test_pack_is_deterministic_and_verifies(tmp_path: Path) -> None:
    record, blobs = _record_with_blob(tmp_path)
    a = pack(record, lambda d: blobs / blob_member(d), tmp_path / "a.tar")
    b = pack(record, lambda d: blobs / blob_member(d), tmp_path / "b.tar")
    assert a.read_bytes() == b.read_bytes()
    out = tmp_path / "x"
    verified = verify_tar(a, extract_to=out)
    assert verified.record == record
    assert (out / blob_member(record.results.outputs[0].hash)).read_bytes() == b"weights" * 100


def _rewrite(src: Path, dest: Path, edit) -> None:  # type: ignore[no-untyped-def]
    with tarfile.open(src) as t:
        members = [(m, t.extractfile(m).read()) for m in t.getmembers()]  # type: ignore[union-attr]
    with tarfile.open(dest, "w") as t:
        for m, data in edit(members):
            m.size = len(data)
            t.addfile(m, io.BytesIO(data))


def test_flipped_byte_names_the_member(tmp_path: Path) -> None:
    record, blobs = _record_with_blob(tmp_path)
    good = pack(record, lambda d: blobs / blob_member(d), tmp_path / "good.tar")
    raw = bytearray(good.read_bytes())
    i = raw.index(b"weightsweights")
    raw[i] ^= 0xFF
    bad = tmp_path / "bad.tar"
    bad.write_bytes(bytes(raw))
    with pytest.raises(CapsuleInvalid) as e:
        verify_tar(bad)
    assert "blobs/" in str(e.value) and "checksum" in str(e.value)


def test_truncated_capsule(tmp_path: Path) -> None:
    record, blobs = _record_with_blob(tmp_path)
    good = pack(record, lambda d: blobs / blob_member(d), tmp_path / "good.tar")
    bad = tmp_path / "trunc.tar"
    bad.write_bytes(good.read_bytes()[:1500])
    with pytest.raises(CapsuleInvalid):
        verify_tar(bad)


def test_unknown_format_version(tmp_path: Path) -> None:
    record, blobs = _record_with_blob(tmp_path)
    record.format = "repro.capsule/v9"
    good = pack(record, lambda d: blobs / blob_member(d), tmp_path / "v9.tar")
    with pytest.raises(CapsuleInvalid) as e:
        verify_tar(good)
    assert "repro.capsule/v9" in str(e.value)


@pytest.mark.parametrize("name", ["../evil.txt", "/abs/evil.txt", "blobs/../../evil.txt"])
def test_member_escaping_the_archive_is_refused(tmp_path: Path, name: str) -> None:
    record, blobs = _record_with_blob(tmp_path)
    good = pack(record, lambda d: blobs / blob_member(d), tmp_path / "good.tar")

    def add_evil(members):  # type: ignore[no-untyped-def]
        evil = tarfile.TarInfo(name)
        return [(evil, b"pwned"), *members]

    bad = tmp_path / "evil.tar"
    _rewrite(good, bad, add_evil)
    out = tmp_path / "deep" / "out"
    out.mkdir(parents=True)
    with pytest.raises(CapsuleInvalid) as e:
        verify_tar(bad, extract_to=out)
    assert "escapes" in str(e.value)
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "deep" / "evil.txt").exists()


def test_symlink_member_is_refused(tmp_path: Path) -> None:
    record, blobs = _record_with_blob(tmp_path)
    good = pack(record, lambda d: blobs / blob_member(d), tmp_path / "good.tar")

    def add_link(members):  # type: ignore[no-untyped-def]
        link = tarfile.TarInfo("blobs/link")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        return [*members, (link, b"")]

    bad = tmp_path / "link.tar"
    _rewrite(good, bad, add_link)
    with pytest.raises(CapsuleInvalid) as e:
        verify_tar(bad, extract_to=tmp_path / "o")
    assert "link" in str(e.value)


def test_member_not_in_sums_is_tampering(tmp_path: Path) -> None:
    record, blobs = _record_with_blob(tmp_path)
    good = pack(record, lambda d: blobs / blob_member(d), tmp_path / "good.tar")
    bad = tmp_path / "extra.tar"
    _rewrite(good, bad, lambda ms: [*ms, (tarfile.TarInfo("blobs/zz/extra"), b"x")])
    with pytest.raises(CapsuleInvalid) as e:
        verify_tar(bad)
    assert "not in SHA256SUMS" in str(e.value)


def test_not_a_tar(tmp_path: Path) -> None:
    f = tmp_path / "x.tar"
    f.write_bytes(b"hello")
    with pytest.raises(CapsuleInvalid):
        verify_tar(f)


@pytest.mark.parametrize("rename", ["./{}", "{}/.", "x/../{}", "{}//"])
def test_member_names_not_in_canonical_form_are_refused(tmp_path: Path, rename: str) -> None:
    """A name an extractor would clean into another (``./capsule.yaml``) is refused, not cleaned."""
    record, blobs = _record_with_blob(tmp_path)
    good = pack(record, lambda d: blobs / blob_member(d), tmp_path / "good.tar")

    def renamed(members):  # type: ignore[no-untyped-def]
        for info, _ in members:
            if info.name == "capsule.yaml":
                info.name = rename.format(info.name)
        return members

    bad = tmp_path / "renamed.tar"
    _rewrite(good, bad, renamed)
    with pytest.raises(CapsuleInvalid, match="canonical form") as e:
        verify_tar(bad, extract_to=tmp_path / "o")
    assert e.value.exit_code == 6 and "\n" not in e.value.message
