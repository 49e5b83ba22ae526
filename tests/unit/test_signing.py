"""The signing rules on bytes: keys, the SIGNATURE member, and what a hostile one gets."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import stat
import tarfile
from pathlib import Path

import pytest

from repro.errors import CapsuleInvalid, ExitCode, UsageError
from repro.store import signing
from repro.store.record import Record
from repro.store.signing import Trust
from repro.store.tarwriter import pack
from repro.store.verify import read_seal, verify_tar

SUMS = b"0" * 64 + b"  capsule.yaml\n"


@pytest.fixture
def key(tmp_path: Path) -> signing.SigningKey:
    return signing.new_key(tmp_path / "team.key")


def test_a_new_key_is_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        made = signing.new_key(tmp_path / "k")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o600
    assert made.id == hashlib.sha256((tmp_path / "k").read_bytes()).hexdigest()[:16]
    assert signing.load_key(tmp_path / "k") == made
    assert signing.new_key(tmp_path / "k2").id != made.id


def test_sign_then_check_and_every_byte_counts(key: signing.SigningKey) -> None:
    signature = signing.sign(key, SUMS)
    assert signing.sign(key, SUMS) == signature  # deterministic: re-exports give the same bytes
    seal = signing.check_seal("run.tar", SUMS, signature, Trust(key, require=True))
    assert (seal.signed, seal.key_id, seal.checked) == (True, key.id, True)
    assert signing.check_seal("run.tar", SUMS, signature, Trust()).checked is False
    for i in (0, len(SUMS) - 1):
        changed = bytearray(SUMS)
        changed[i] ^= 1
        with pytest.raises(CapsuleInvalid, match=f"bad signature for key {key.id}") as e:
            signing.check_seal("run.tar", bytes(changed), signature, Trust(key))
        assert e.value.exit_code == ExitCode.CAPSULE_INVALID


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"not json", "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"algorithm": "none", "key_id": "0000000000000000", "mac": ""}', "algorithm 'none'"),
        (b'{"algorithm": "hmac-sha256", "key_id": "../x", "mac": "00"}', "malformed"),
        (b'{"algorithm": "hmac-sha256", "key_id": "0000000000000000", "mac": 5}', "malformed"),
    ],
)
def test_a_malformed_signature_is_refused_even_without_a_key(body: bytes, match: str) -> None:
    with pytest.raises(CapsuleInvalid, match=match):
        signing.check_seal("run.tar", SUMS, body, Trust())


def test_unsigned_passes_unless_required(key: signing.SigningKey) -> None:
    assert signing.check_seal("run.tar", SUMS, None, Trust(key)).signed is False
    with pytest.raises(CapsuleInvalid, match="run.tar is not signed"):
        signing.check_seal("run.tar", SUMS, None, Trust(key, require=True))


@pytest.mark.parametrize("content", [b"", b"x" * 31, b"x" * 4096])
def test_a_key_of_another_size_is_a_usage_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "k").write_bytes(content)
    with pytest.raises(UsageError, match="is not a repro key") as e:
        signing.load_key(tmp_path / "k")
    assert e.value.exit_code == ExitCode.USAGE and "repro keygen" in (e.value.hint or "")


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


def test_seal_members_are_bounded_and_read_in_place(tmp_path: Path, key: signing.SigningKey) -> None:
    record = Record(id="20260101-000000-aaaa", created="2026-01-01T00:00:00+00:00")
    tar = pack(record, lambda d: tmp_path / d, tmp_path / "run.tar", signer=lambda s: signing.sign(key, s))
    sums, signature = read_seal(tar)
    assert verify_tar(tar).sums == sums and verify_tar(tar).signature == signature
    with tarfile.open(tar) as t:
        members = {m.name: t.extractfile(m).read() for m in t}  # type: ignore[union-attr]
    huge = _tar(tmp_path / "huge.tar", {**members, "SIGNATURE": json.dumps({"pad": "x" * 5000}).encode()})
    for read in (read_seal, verify_tar):
        with pytest.raises(CapsuleInvalid, match="SIGNATURE is larger than 4096 bytes"):
            read(huge)
    (tmp_path / "not.tar").write_bytes(b"hello")
    with pytest.raises(CapsuleInvalid, match="not a tar archive"):
        read_seal(tmp_path / "not.tar")


@pytest.fixture
def ed_key(tmp_path: Path) -> signing.SigningKey:
    return signing.new_key(tmp_path / "ed.key", signing.ED25519)


def test_an_ed25519_public_key_checks_and_never_signs(tmp_path: Path, ed_key: signing.SigningKey) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    public = signing.load_key(tmp_path / "ed.key.pub")
    assert (public.algorithm, public.id, public.can_sign) == ("ed25519", ed_key.id, False)
    assert signing.load_key(tmp_path / "ed.key") == ed_key
    signature = signing.sign(ed_key, SUMS)
    assert signing.sign(ed_key, SUMS) == signature  # RFC 8032 signatures are deterministic
    seal = signing.check_seal("run.tar", SUMS, signature, Trust(public, require=True))
    assert (seal.signed, seal.key_id, seal.checked, seal.algorithm) == (True, ed_key.id, True, "ed25519")
    raw = base64.b64decode(json.loads(signature)["signature"])
    Ed25519PublicKey.from_public_bytes(public.public).verify(raw, SUMS)  # the library's own check
    for i in (0, len(SUMS) - 1):
        changed = bytearray(SUMS)
        changed[i] ^= 1
        with pytest.raises(CapsuleInvalid, match=f"bad signature for ed25519 key {ed_key.id}") as e:
            signing.check_seal("run.tar", bytes(changed), signature, Trust(public))
        assert e.value.exit_code == ExitCode.CAPSULE_INVALID
    for refuse in (lambda: signing.sign(public, SUMS), lambda: signing.load_signing_key(public.path)):
        with pytest.raises(UsageError, match="public ed25519 key") as u:
            refuse()
        assert u.value.exit_code == ExitCode.USAGE


def test_an_hmac_key_does_not_check_an_ed25519_signature(
    key: signing.SigningKey, ed_key: signing.SigningKey
) -> None:
    with pytest.raises(CapsuleInvalid, match="not with the key given"):
        signing.check_seal("run.tar", SUMS, signing.sign(ed_key, SUMS), Trust(key))
    with pytest.raises(CapsuleInvalid, match="not with the key given"):
        signing.check_seal("run.tar", SUMS, signing.sign(key, SUMS), Trust(ed_key))


@pytest.mark.parametrize(
    "signature",
    ["not base64!", base64.b64encode(b"x" * 63).decode(), base64.b64encode(b"x" * 64).decode()[:-2], 7],
)
def test_a_malformed_ed25519_signature_is_refused(signature: object) -> None:
    body = {"algorithm": "ed25519", "key_id": "0" * 16, "signs": "SHA256SUMS", "signature": signature}
    with pytest.raises(CapsuleInvalid, match="malformed"):
        signing.check_seal("run.tar", SUMS, json.dumps(body).encode(), Trust())


def test_a_pem_that_is_not_an_ed25519_or_p256_key_is_a_usage_error(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    ec_pem = ec.generate_private_key(ec.SECP384R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    for content, match in [
        (ec_pem, "another algorithm"),
        (b"-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n", "not a readable PEM"),
        (b"-----BEGIN PUBLIC KEY-----\n", "not a readable PEM"),
    ]:
        (tmp_path / "k").write_bytes(content)
        with pytest.raises(UsageError, match=match) as e:
            signing.load_key(tmp_path / "k")
        assert e.value.exit_code == ExitCode.USAGE


def test_an_ecdsa_p256_key_signs_capsules_checked_by_its_public_half(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = signing.new_key(tmp_path / "ec.key", signing.ECDSA_P256)
    assert (tmp_path / "ec.key").stat().st_mode & 0o777 == 0o600
    public = signing.load_verifying_key(tmp_path / "ec.key.pub")
    assert public.algorithm == signing.ECDSA_P256 and public.id == key.id and not public.can_sign
    pem = serialization.load_pem_public_key((tmp_path / "ec.key.pub").read_bytes())
    assert isinstance(pem, ec.EllipticCurvePublicKey) and pem.curve.name == "secp256r1"
    seal = signing.sign(signing.load_signing_key(tmp_path / "ec.key"), SUMS)
    body = json.loads(seal)
    assert body["algorithm"] == "ecdsa-p256" and body["key_id"] == key.id
    pem.verify(base64.b64decode(body["signature"]), SUMS, ec.ECDSA(hashes.SHA256()))  # independently
    checked = signing.check_seal("run.tar", SUMS, seal, Trust(public, require=True))
    assert checked.checked and checked.algorithm == "ecdsa-p256"
    with pytest.raises(CapsuleInvalid, match="bad signature for ecdsa-p256 key"):
        signing.check_seal("run.tar", SUMS + b"x", seal, Trust(public))
    other = signing.new_key(tmp_path / "other.key", signing.ECDSA_P256)
    with pytest.raises(CapsuleInvalid, match="not with the key given"):
        signing.check_seal("run.tar", SUMS, signing.sign(other, SUMS), Trust(public))
    with pytest.raises(UsageError, match="private key: a signature is checked with the public key"):
        signing.load_verifying_key(tmp_path / "ec.key")
