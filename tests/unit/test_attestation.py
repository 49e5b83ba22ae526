"""The DSSE envelope and the attestation's parts on bytes: PAE, sealing and opening, the
capsule digest an attestation names."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from repro.errors import CapsuleInvalid, ExitCode, UsageError
from repro.store import attestation, dsse, signing
from repro.store.record import FileEntry, ImageInfo, Record
from repro.store.runs import LoadedRun, Store
from repro.store.tarwriter import capsule_sums, pack
from repro.store.verify import read_seal


def test_pae_is_the_spec_s_encoding() -> None:
    # the example of the DSSE protocol document
    expected = b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == expected
    assert dsse.pae("t", b"") == b"DSSEv1 1 t 0 "


def test_an_envelope_opens_with_the_public_key_only(tmp_path: Path) -> None:
    key = signing.new_key(tmp_path / "k", signing.ED25519)
    public = signing.load_key(tmp_path / "k.pub")
    envelope = dsse.seal("application/vnd.in-toto+json", b'{"a": 1}', key)
    raw = json.dumps(envelope).encode()
    opened = dsse.open_envelope(raw, "a.jsonl", "application/vnd.in-toto+json", public)
    assert (opened.payload, opened.key_id) == (b'{"a": 1}', key.id)
    with pytest.raises(CapsuleInvalid, match="payloadType") as e:
        dsse.open_envelope(raw, "a.jsonl", "application/other", public)
    assert e.value.exit_code == ExitCode.CAPSULE_INVALID
    hmac_key = signing.new_key(tmp_path / "h")
    with pytest.raises(UsageError, match="HMAC key"):
        dsse.seal("t", b"x", hmac_key)
    with pytest.raises(UsageError, match="can never sign"):
        dsse.seal("t", b"x", public)
    too_many = {**envelope, "signatures": envelope["signatures"] * (dsse.MAX_SIGNATURES + 1)}
    with pytest.raises(CapsuleInvalid, match="at most"):
        dsse.open_envelope(json.dumps(too_many).encode(), "a.jsonl", "application/vnd.in-toto+json", public)
    sig = base64.b64decode(envelope["signatures"][0]["sig"])
    assert signing.verify_bytes(public, dsse.pae("application/vnd.in-toto+json", b'{"a": 1}'), sig)


def test_capsule_sums_are_the_sums_pack_writes(tmp_path: Path) -> None:
    store = Store(tmp_path)
    record = Record(id="20260101-000000-aaaa", created="2026-01-01T00:00:00+00:00")
    record.command.argv = ["python", "train.py"]
    digest = store.put_bytes(b"weights" * 100)
    record.results.outputs = [FileEntry("model.pt", 700, digest, stored=True)]
    store.seal(record, store.begin_run(record.id, record.command.argv))
    sums = capsule_sums(record, store.blob_path)
    tar = pack(record, store.blob_path, tmp_path / "run.tar")
    assert read_seal(tar)[0] == sums
    assert hashlib.sha256(b"weights" * 100).hexdigest() != hashlib.sha256(sums).hexdigest()
    store.blob_path(digest).unlink()
    with pytest.raises(CapsuleInvalid, match="missing from the store"):
        capsule_sums(record, store.blob_path)


def _run(tmp_path: Path, record: Record) -> LoadedRun:
    store = Store(tmp_path)
    store.seal(record, store.begin_run(record.id, record.command.argv))
    return store.load_run(record.id)


def _record(store: Store) -> Record:
    record = Record(id="20260101-000000-bbbb", created="2026-01-01T00:00:00+00:00")
    record.command.argv = ["python", "train.py", "--lr", "0.1"]
    record.results.status = "succeeded"
    record.results.started, record.results.finished = "2026-01-01T00:00:00+00:00", "2026-01-01T00:01:00+00:00"
    model = store.put_bytes(b"weights")
    record.results.outputs = [
        FileEntry("model.pt", 7, model, stored=True),
        FileEntry("huge.bin", 1 << 40, "f" * 32, stored=False),
        FileEntry("last.pt", 0, "", link="model.pt"),
    ]
    return record


def test_the_predicate_names_patch_untracked_lock_and_image(tmp_path: Path) -> None:
    store = Store(tmp_path)
    record = _record(store)
    record.code.kind, record.code.commit, record.code.dirty = "git", "a" * 40, True
    record.code.patch = store.put_bytes(b"diff --git a/train.py b/train.py\n")
    record.code.untracked = [FileEntry("notes.txt", 3, "1" * 32)]
    record.deps.lockfile, record.deps.lock_blob = "requirements.lock", store.put_bytes(b"torch==2.13.0\n")
    record.deps.image = ImageInfo(id="sha256:" + "c" * 64, tag="repro-env:x")
    loaded = _run(tmp_path, record)
    made = attestation.attest(loaded, "d" * 64, [attestation.Replay("r1", "identical", "e" * 64)], None)
    assert [s.name for s in made.subjects] == ["model.pt"] and made.left_out == ["huge.bin"]
    assert made.subjects[0].sha256 == hashlib.sha256(b"weights").hexdigest()
    deps = {
        d["name"]: d["digest"] for d in made.statement["predicate"]["buildDefinition"]["resolvedDependencies"]
    }
    assert deps == {
        "code": {"gitCommit": "a" * 40},
        "code.patch": {"sha256": hashlib.sha256(b"diff --git a/train.py b/train.py\n").hexdigest()},
        "code.untracked": {"sha256": hashlib.sha256(b"notes.txt\x003\x00" + b"1" * 32 + b"\x00").hexdigest()},
        "lock:requirements.lock": {"sha256": hashlib.sha256(b"torch==2.13.0\n").hexdigest()},
        "image": {"sha256": "c" * 64},
    }
    byproducts = made.statement["predicate"]["runDetails"]["byproducts"]
    assert byproducts[0]["digest"] == {"sha256": "d" * 64}
    assert byproducts[1] == {
        "name": "replay:r1",
        "digest": {"sha256": "e" * 64},
        "annotations": {"verdict": "identical"},
    }
    assert made.envelope["signatures"] == [] and made.key_id is None


def test_only_a_succeeded_run_with_a_stored_output_is_attested(tmp_path: Path) -> None:
    store = Store(tmp_path)
    record = _record(store)
    record.results.status = "failed"
    with pytest.raises(UsageError, match="failed: an attestation vouches"):
        attestation.require_attestable(record)
    record.results.status = "succeeded"
    record.results.outputs = [o for o in record.results.outputs if not o.stored]
    with pytest.raises(UsageError, match="stored no output file"):
        attestation.require_attestable(record)


def test_summary_never_raises(tmp_path: Path) -> None:
    key = signing.new_key(tmp_path / "k", signing.ED25519)
    store = Store(tmp_path / "s")
    loaded = _run(tmp_path / "s", _record(store))
    line = attestation.attest(loaded, "d" * 64, [], key).line()
    assert attestation.summary(line) == attestation.Summary(1, [key.id])
    for raw in (b"{", b"[]", b'{"payload": "***"}', line[: len(line) // 2], b'{"payload": "e30="}'):
        assert attestation.summary(raw).problem is not None


def test_an_envelope_in_url_safe_base64_opens_too(tmp_path: Path) -> None:
    key = signing.new_key(tmp_path / "k", signing.ED25519)
    payload = bytes(range(250, 256)) * 7  # bytes whose base64 has + and /
    envelope = dsse.seal("t/x", payload, key)
    assert "+" in envelope["payload"] or "/" in envelope["payload"]
    url_safe = {
        **envelope,
        "payload": base64.urlsafe_b64encode(payload).decode().rstrip("="),
        "signatures": [
            {
                **envelope["signatures"][0],
                "sig": envelope["signatures"][0]["sig"].replace("+", "-").replace("/", "_"),
            }
        ],
    }
    assert dsse.open_envelope(json.dumps(url_safe).encode(), "a", "t/x", key).payload == payload
    url_safe["payload"] = url_safe["payload"][:-1] + "!"
    with pytest.raises(CapsuleInvalid, match="not valid base64"):
        dsse.open_envelope(json.dumps(url_safe).encode(), "a", "t/x", key)
