"""The DSSE envelope and the attestation's parts on bytes: PAE, sealing and opening, the
capsule digest an attestation names."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from repro.errors import CapsuleInvalid, ExitCode, UsageError
from repro.store import dsse, signing
from repro.store.capsule import FileEntry, Record, capsule_sums, pack, read_seal
from repro.store.runs import Store


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
