"""Signed capsules: a signature over a capsule's SHA256SUMS, with one of two kinds of key file.

SHA256SUMS names the SHA-256 of every other member (record, blobs, the carried image), so one
signature over its exact bytes seals them all; the signature is one more member, ``SIGNATURE``,
that changes no other and names its algorithm and key id.

- ``hmac-sha256``: a shared secret (32 random bytes). A checked signature proves a holder of that
  key sealed these sums and no member changed since; whoever can check one can also make one.
- ``ed25519`` (RFC 8032, through ``cryptography``): a private key (PKCS#8 PEM, mode 0600) signs,
  its public key (``PATH.pub``, SubjectPublicKeyInfo PEM) checks and can never sign. A checked
  signature proves the holder of the private key sealed these sums; anyone may hold the public key.
- ``ecdsa-p256`` (ECDSA over NIST P-256 with SHA-256, DER signatures): the same private/public
  split as Ed25519, in the key type that OpenSSF Model Signing verifiers check (`repro.store.oms`).

This module is the one home of ``cryptography``: the attestation signs and checks through
`sign_bytes` and `verify_bytes`. No network, no key server.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import errno
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from repro.errors import CapsuleInvalid, NotFoundError, UsageError
from repro.runtime.contract import parse_json
from repro.store.capsule import SIGNATURE_NAME, SUMS_NAME
from repro.store.verify import read_seal

Algorithm = Literal["hmac-sha256", "ed25519", "ecdsa-p256"]
HMAC: Algorithm = "hmac-sha256"
ED25519: Algorithm = "ed25519"
ECDSA_P256: Algorithm = "ecdsa-p256"
ALGORITHMS: tuple[Algorithm, ...] = (HMAC, ED25519, ECDSA_P256)
ECDSA_SIGNATURE_MAX = 72  # a DER ECDSA-P256 signature: two 32-byte integers with their framing
KEY_BYTES = 32  # 256 bits: the size of HMAC-SHA256's block output, as RFC 2104 recommends
ED25519_SIGNATURE_BYTES = 64  # RFC 8032
KEY_ID_HEX = 16  # a key id: the first 16 hex digits of the key's SHA-256 (names a key, reveals nothing)
PUBLIC_SUFFIX = ".pub"  # `repro keygen --type ed25519 PATH` writes the public key beside it
_PEM_MAX = 4096  # a PEM Ed25519 or P-256 key is 120-250 bytes; anything this large is not one
_PRIVATE_PEM = b"-----BEGIN PRIVATE KEY-----"
_PUBLIC_PEM = b"-----BEGIN PUBLIC KEY-----"
_KEYGEN_HINT = "make one with `repro keygen PATH`, or give the file `repro keygen` wrote"


@dataclass(frozen=True)
class SigningKey:
    """A key file and where it came from: an HMAC secret (signs and checks), an Ed25519 private
    key (``secret`` is its 32-byte seed; signs and checks), an ECDSA P-256 private key
    (``secret`` is its PKCS#8 DER) or either's public key (``secret`` empty; checks only)."""

    secret: bytes
    path: Path
    algorithm: Algorithm = HMAC
    public: bytes = b""  # Ed25519: the raw 32-byte public key; ECDSA P-256: SubjectPublicKeyInfo DER

    @property
    def id(self) -> str:
        return key_id(self.secret if self.algorithm == HMAC else self.public)

    @property
    def can_sign(self) -> bool:
        return bool(self.secret)

    @property
    def label(self) -> str:
        """How a message names it: ``ed25519 key 0123…`` or ``key 0123…`` (HMAC, as before)."""
        return f"key {self.id}" if self.algorithm == HMAC else f"{self.algorithm} key {self.id}"


@dataclass(frozen=True)
class Trust:
    """What a command demands of a capsule's signature: checked with ``key``; present when ``require``."""

    key: SigningKey | None = None
    require: bool = False


@dataclass(frozen=True)
class Seal:
    """What a capsule's signature says, and whether it was checked."""

    signed: bool
    key_id: str | None = None
    checked: bool = False  # the signature was checked with the key and matched
    sums_sha256: str = ""  # which SHA256SUMS this is about (to match the bytes read again later)
    algorithm: Algorithm | None = None  # what SIGNATURE names, when signed


def key_id(secret: bytes) -> str:
    return hashlib.sha256(secret).hexdigest()[:KEY_ID_HEX]


def new_key(path: Path, algorithm: Algorithm = HMAC) -> SigningKey:
    """Write a new random key to ``path`` (mode 0600); for Ed25519 and ECDSA P-256 its public key
    to ``path.pub`` too; never overwrite a file.

    Raises:
        UsageError: the path (or ``path.pub``) exists. NotFoundError: its directory does not.
    """
    if algorithm == HMAC:
        secret = secrets.token_bytes(KEY_BYTES)
        _write_new(path, secret, 0o600)
        return SigningKey(secret, path)
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    public_path = public_key_path(path)
    if public_path.exists():  # checked first: a private key is never left without its public half
        _write_new(public_path, b"", 0o644)  # raises the "never overwritten" error
    private = (
        Ed25519PrivateKey.generate() if algorithm == ED25519 else ec.generate_private_key(ec.SECP256R1())
    )
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _write_new(path, pem, 0o600)
    try:
        _write_new(public_path, public_pem, 0o644)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return _load_pem(path, pem)


def public_key_path(path: Path) -> Path:
    """Where `new_key` writes the public half of an Ed25519 key: ``PATH.pub``."""
    return path.with_name(path.name + PUBLIC_SUFFIX)


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` with ``data`` and ``mode`` whatever the umask; never overwrite.

    Raises:
        UsageError: the path exists. NotFoundError: its directory does not.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError as e:
        raise UsageError(
            f"{path} already exists; a key file is never overwritten",
            hint="choose another path (remove the old file first only if nothing was signed with it)",
        ) from e
    except FileNotFoundError as e:
        raise NotFoundError(
            f"no directory {path.parent} to write the key into", hint="create it first"
        ) from e
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
    finally:
        os.close(fd)


def load_key(path: Path) -> SigningKey:
    """Read a key file: 32 bytes of HMAC secret, or an Ed25519 or ECDSA P-256 private or public
    key in PEM.

    Raises:
        NotFoundError: no such file. UsageError: unreadable, or not a key `repro keygen` writes.
    """
    try:
        with open(path, "rb") as f:
            data = f.read(_PEM_MAX + 1)
    except FileNotFoundError as e:
        raise NotFoundError(f"no key file at {path}", hint=_KEYGEN_HINT) from e
    except OSError as e:
        why = "it is a directory" if e.errno == errno.EISDIR else (e.strerror or type(e).__name__)
        raise UsageError(
            f"cannot read key file {path}: {why}", hint="check the path and its permissions"
        ) from e
    if data.lstrip().startswith((_PRIVATE_PEM, _PUBLIC_PEM)) and len(data) <= _PEM_MAX:
        return _load_pem(path, data)
    if len(data) != KEY_BYTES:
        size = f"{len(data)} bytes" if len(data) <= KEY_BYTES else f"more than {KEY_BYTES} bytes"
        raise UsageError(f"{path} is not a repro key: {size}, a key is {KEY_BYTES}", hint=_KEYGEN_HINT)
    return SigningKey(data, path)


def load_signing_key(path: Path) -> SigningKey:
    """`load_key` for signing: a public key is refused.

    Raises:
        NotFoundError, UsageError: as `load_key`; a public key (it can only check).
    """
    key = load_key(path)
    if not key.can_sign:
        raise UsageError(
            f"{path} is the public {key.label}: it checks signatures and can never make one",
            hint="sign with its private key file (the path without .pub)",
        )
    return key


def load_verifying_key(path: Path) -> SigningKey:
    """`load_key` for checking an Ed25519 or ECDSA signature: a private key is refused (a verifier
    never needs it, and one passed around by mistake should not become a habit).

    Raises:
        NotFoundError, UsageError: as `load_key`; an Ed25519 or ECDSA private key.
    """
    key = load_key(path)
    if key.can_sign and key.algorithm != HMAC:
        raise UsageError(
            f"{path} is an {key.algorithm} private key: a signature is checked with the public key",
            hint=f"pass {path}.pub (written beside it by `repro keygen --type {key.algorithm}`)",
        )
    return key


def _load_pem(path: Path, pem: bytes) -> SigningKey:
    """An Ed25519 or ECDSA P-256 key from PEM (PKCS#8 private or SubjectPublicKeyInfo public).

    Raises:
        UsageError: not valid PEM, or a key of another algorithm or curve.
    """
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    hint = "make one with `repro keygen --type ed25519 PATH` (or --type ecdsa-p256)"
    der, spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    pkcs8, bare = serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    try:
        if pem.lstrip().startswith(_PRIVATE_PEM):
            private = serialization.load_pem_private_key(pem, password=None)
            if isinstance(private, ed25519.Ed25519PrivateKey):
                raw_public = private.public_key().public_bytes_raw()
                return SigningKey(private.private_bytes_raw(), path, ED25519, raw_public)
            if isinstance(private, ec.EllipticCurvePrivateKey) and isinstance(private.curve, ec.SECP256R1):
                secret = private.private_bytes(der, pkcs8, bare)
                return SigningKey(secret, path, ECDSA_P256, private.public_key().public_bytes(der, spki))
        else:
            public = serialization.load_pem_public_key(pem)
            if isinstance(public, ed25519.Ed25519PublicKey):
                return SigningKey(b"", path, ED25519, public.public_bytes_raw())
            if isinstance(public, ec.EllipticCurvePublicKey) and isinstance(public.curve, ec.SECP256R1):
                return SigningKey(b"", path, ECDSA_P256, public.public_bytes(der, spki))
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        raise UsageError(f"{path} is not a readable PEM key: {_first_line(e)}", hint=hint) from e
    raise UsageError(
        f"{path} is a PEM key of another algorithm; repro signs with Ed25519 or ECDSA P-256", hint=hint
    )


def public_pem(key: SigningKey) -> bytes:
    """The public half of an Ed25519 or ECDSA P-256 key as SubjectPublicKeyInfo PEM (as `new_key`
    writes it to ``PATH.pub``)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if key.algorithm == ED25519:
        public = Ed25519PublicKey.from_public_bytes(key.public)
        spki = serialization.PublicFormat.SubjectPublicKeyInfo
        return public.public_bytes(serialization.Encoding.PEM, spki)
    return serialization.load_der_public_key(key.public).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return (lines[0] if lines else type(e).__name__)[:160]


def sign(key: SigningKey, sums: bytes) -> bytes:
    """The SIGNATURE member for these SHA256SUMS bytes, naming its algorithm and key id
    (deterministic: the same key and sums give the same bytes, Ed25519 included).

    Raises:
        UsageError: a public key (it cannot sign).
    """
    body: dict[str, str] = {"algorithm": key.algorithm, "key_id": key.id, "signs": SUMS_NAME}
    if key.algorithm == HMAC:
        body["mac"] = _mac(key.secret, sums)
    else:
        body["signature"] = base64.b64encode(sign_bytes(key, sums)).decode()
    return (json.dumps(body, sort_keys=True, indent=1) + "\n").encode()


def sign_bytes(key: SigningKey, data: bytes) -> bytes:
    """The raw signature of ``data``: 64 bytes of Ed25519, 32 of HMAC-SHA256, or an ECDSA P-256
    signature over its SHA-256 (DER, at most 72 bytes).

    Raises:
        UsageError: a public key (it cannot sign).
    """
    if not key.can_sign:
        raise UsageError(
            f"{key.path} is the public {key.label}: it can never sign",
            hint="sign with its private key file (the path without .pub)",
        )
    if key.algorithm == HMAC:
        return hmac.new(key.secret, data, hashlib.sha256).digest()
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if key.algorithm == ED25519:
        return Ed25519PrivateKey.from_private_bytes(key.secret).sign(data)
    private = serialization.load_der_private_key(key.secret, password=None)
    assert isinstance(private, ec.EllipticCurvePrivateKey)  # `_load_pem` made it
    return private.sign(data, ec.ECDSA(hashes.SHA256()))


def verify_bytes(key: SigningKey, data: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is ``key``'s over ``data`` (Ed25519 needs only the public key)."""
    if key.algorithm == HMAC:
        return hmac.compare_digest(signature, hmac.new(key.secret, data, hashlib.sha256).digest())
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        if key.algorithm == ED25519:
            Ed25519PublicKey.from_public_bytes(key.public).verify(signature, data)
            return True
        public = serialization.load_der_public_key(key.public)
        if not isinstance(public, ec.EllipticCurvePublicKey):
            return False
        public.verify(signature, data, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        return False
    return True


def signature_sizes(algorithm: Algorithm) -> tuple[int, int]:
    """The (fewest, most) bytes a raw signature of ``algorithm`` has."""
    if algorithm == ECDSA_P256:
        return 8, ECDSA_SIGNATURE_MAX
    size = ED25519_SIGNATURE_BYTES if algorithm == ED25519 else KEY_BYTES
    return size, size


def _mac(secret: bytes, sums: bytes) -> str:
    return hmac.new(secret, sums, hashlib.sha256).hexdigest()


def check_seal(where: str, sums: bytes, signature: bytes | None, trust: Trust) -> Seal:
    """The one check of a capsule's signature (verify and replay): parse it, and with a key,
    check it over ``sums`` (HMAC: recomputed; Ed25519: checked with the public key).

    Raises:
        CapsuleInvalid: a malformed signature; unsigned when ``trust.require``; signed with
            another key or algorithm than ``trust.key``; a signature that does not match (exit 6).
    """
    sums_sha256 = hashlib.sha256(sums).hexdigest()
    if signature is None:
        if trust.require:
            raise CapsuleInvalid(
                f"{where} is not signed, and --require-signed was given",
                member=SIGNATURE_NAME,
                hint="ask for a signed export: `repro export RUN --sign KEYFILE`",
            )
        return Seal(signed=False, sums_sha256=sums_sha256)
    algorithm, claimed_id, raw = _parse(signature)
    seal = Seal(signed=True, key_id=claimed_id, sums_sha256=sums_sha256, algorithm=algorithm)
    if trust.key is None:
        return seal
    claimed = f"key {claimed_id}" if algorithm == HMAC else f"{algorithm} key {claimed_id}"
    if claimed_id != trust.key.id or algorithm != trust.key.algorithm:
        raise CapsuleInvalid(
            f"{where} is signed with {claimed}, not with the key given ({trust.key.label}, {trust.key.path})",
            member=SIGNATURE_NAME,
            hint=f"check it with the key whose id is {claimed_id}, or do not trust it",
        )
    if not verify_bytes(trust.key, sums, raw):
        raise CapsuleInvalid(
            f"bad signature for {claimed}: {where} changed after it was signed",
            member=SIGNATURE_NAME,
            hint="do not trust or replay it; ask its author for a fresh signed export",
        )
    return dataclasses.replace(seal, checked=True)


def check_capsule(path: Path, trust: Trust) -> Seal:
    """`check_seal` on a capsule tar's SHA256SUMS and SIGNATURE, read in place: nothing is extracted.

    Raises:
        CapsuleInvalid: an unreadable capsule, or a signature that fails ``trust``.
    """
    sums, signature = read_seal(path)
    return check_seal(path.name, sums, signature, trust)


def _parse(signature: bytes) -> tuple[Algorithm, str, bytes]:
    """(algorithm, key id, raw signature) of a SIGNATURE member.

    Raises:
        CapsuleInvalid: not the JSON `sign` writes, or an algorithm this repro does not check.
    """
    try:
        body = parse_json(signature)
    except (ValueError, RecursionError) as e:
        raise CapsuleInvalid(f"{SIGNATURE_NAME} is not valid JSON", member=SIGNATURE_NAME) from e
    if not isinstance(body, dict):
        raise CapsuleInvalid(f"{SIGNATURE_NAME} is not a JSON object", member=SIGNATURE_NAME)
    algorithm, claimed_id = body.get("algorithm"), body.get("key_id")
    if algorithm not in ALGORITHMS:
        raise CapsuleInvalid(
            f"{SIGNATURE_NAME} uses algorithm {algorithm!r}; this repro checks {' and '.join(ALGORITHMS)}",
            member=SIGNATURE_NAME,
            hint="upgrade repro, or ask for an export signed with `repro export --sign`",
        )
    if algorithm == HMAC:
        mac = body.get("mac")
        raw = bytes.fromhex(mac) if isinstance(mac, str) and _is_hex(mac, 64) else None
        field = "mac"
    else:
        raw = decode_base64(body.get("signature"))
        fewest, most = signature_sizes(algorithm)
        raw = raw if raw is not None and fewest <= len(raw) <= most else None
        field = "signature"
    if not (isinstance(claimed_id, str) and _is_hex(claimed_id, KEY_ID_HEX)) or raw is None:
        raise CapsuleInvalid(f"{SIGNATURE_NAME} is malformed (key_id or {field})", member=SIGNATURE_NAME)
    return algorithm, claimed_id, raw


def decode_base64(value: object, length: int | None = None) -> bytes | None:
    """Strict standard base64 of a JSON value (of ``length`` bytes when given); None when it is not."""
    if not isinstance(value, str):
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if length is None or len(raw) == length else None


def _is_hex(value: str, length: int) -> bool:
    return len(value) == length and all(c in "0123456789abcdef" for c in value)
