"""`repro export --with-image` and `repro verify` on capsules that carry an image, without an engine."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from repro.errors import ExitCode
from repro.store.capsule import IMAGE_MEMBER
from repro.store.record import ImageInfo, Record
from repro.store.runs import Store
from repro.store.tarwriter import pack


def _sealed(store: Store, run_id: str, backend: str) -> Record:
    record = Record(id=run_id, created="2026-01-01T00:00:00+00:00")
    record.command.argv = ["python", "train.py"]
    record.results.status = "succeeded"
    record.backend.name = backend
    if backend == "docker":
        record.deps.image = ImageInfo(id="sha256:" + "a" * 64, tag="repro-env:" + "b" * 24)
    store.seal(record, store.begin_run(run_id, record.command.argv))
    return record


def test_a_local_run_has_no_image_to_carry(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "repro.yaml").write_text("backend: local\n")
    _sealed(Store(tmp_path), "20260101-000000-aaaa", "local")
    r = cli("export", "latest", "--with-image", "-o", str(tmp_path / "x.tar"), cwd=tmp_path)
    assert r.code == ExitCode.USAGE and "no image to carry" in r.err and "--backend docker" in r.err
    assert not (tmp_path / "x.tar").exists() and "Traceback" not in r.err


def test_verify_checks_and_sizes_a_carried_image(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = Store(tmp_path)
    record = _sealed(store, "20260101-000000-aaaa", "docker")
    archive = tmp_path / "image.tar"
    archive.write_bytes(b"layers" * 1000)
    tar = pack(record, store.blob_path, tmp_path / "run.tar", image_archive=archive)
    ok = cli("verify", str(tar), "--json", cwd=tmp_path)
    assert ok.code == 0 and json.loads(ok.out)["image_bytes"] == 6000
    assert cli("verify", str(tar), cwd=tmp_path).out.splitlines()[0].endswith("image 5.9 KiB included")
    loaded = store.open_capsule(tar)
    assert loaded.image_archive == tar.resolve()
    assert not (loaded.blob_root / IMAGE_MEMBER).exists()  # streamed from the tar, never extracted
    # one byte of the image changed: the capsule is refused
    raw = bytearray(tar.read_bytes())
    with tarfile.open(tar) as t:
        offset = t.getmember(IMAGE_MEMBER).offset_data
    raw[offset] ^= 1
    bad = tmp_path / "bad.tar"
    bad.write_bytes(bytes(raw))
    r = cli("verify", str(bad), cwd=tmp_path)
    assert r.code == ExitCode.CAPSULE_INVALID and IMAGE_MEMBER in r.err
