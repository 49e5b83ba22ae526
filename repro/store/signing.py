"""Signed capsules: an HMAC-SHA256, with a shared key file, over a capsule's SHA256SUMS.

SHA256SUMS names the SHA-256 of every other member (record, blobs, the carried image), so one
MAC over its exact bytes seals them all; the signature is one more member, ``SIGNATURE``, that
changes no other. What a checked signature proves: a holder of that key sealed these sums, and
no member changed since. It is a shared secret: whoever can check a signature can also make one.
Standard library only (``hmac``, ``hashlib``, ``secrets``): no network, no key server.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from repro.errors import CapsuleInvalid, NotFoundError, UsageError
from repro.store.capsule import SIGNATURE_NAME, SUMS_NAME, read_seal

ALGORITHM = "hmac-sha256"
KEY_BYTES = 32  # 256 bits: the size of HMAC-SHA256's block output, as RFC 2104 recommends
KEY_ID_HEX = 16  # a key id: the first 16 hex digits of the key's SHA-256 (names a key, reveals nothing)
_KEYGEN_HINT = "make one with `repro keygen PATH`, or give the file `repro keygen` wrote"


@dataclass(frozen=True)
class SigningKey:
    """A key file's secret and where it came from."""

    secret: bytes
    path: Path

    @property
    def id(self) -> str:
        return key_id(self.secret)


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
    checked: bool = False  # the MAC was recomputed with the key and matched
    sums_sha256: str = ""  # which SHA256SUMS this is about (to match the bytes read again later)


def key_id(secret: bytes) -> str:
    return hashlib.sha256(secret).hexdigest()[:KEY_ID_HEX]


def new_key(path: Path) -> SigningKey:
    """Write a new random key to ``path`` (mode 0600); never overwrite a file.

    Raises:
        UsageError: the path exists. NotFoundError: its directory does not.
    """
    secret = secrets.token_bytes(KEY_BYTES)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
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
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, secret)
    finally:
        os.close(fd)
    return SigningKey(secret, path)


def load_key(path: Path) -> SigningKey:
    """Read a key file.

    Raises:
        NotFoundError: no such file. UsageError: unreadable, or not a 32-byte key.
    """
    try:
        with open(path, "rb") as f:
            secret = f.read(KEY_BYTES + 1)
    except FileNotFoundError as e:
        raise NotFoundError(f"no key file at {path}", hint=_KEYGEN_HINT) from e
    except OSError as e:
        why = "it is a directory" if e.errno == errno.EISDIR else (e.strerror or type(e).__name__)
        raise UsageError(
            f"cannot read key file {path}: {why}", hint="check the path and its permissions"
        ) from e
    if len(secret) != KEY_BYTES:
        size = f"{len(secret)} bytes" if len(secret) <= KEY_BYTES else f"more than {KEY_BYTES} bytes"
        raise UsageError(f"{path} is not a repro key: {size}, a key is {KEY_BYTES}", hint=_KEYGEN_HINT)
    return SigningKey(secret, path)


def sign(key: SigningKey, sums: bytes) -> bytes:
    """The SIGNATURE member for these SHA256SUMS bytes (deterministic: the same key and sums give
    the same bytes)."""
    body = {"algorithm": ALGORITHM, "key_id": key.id, "signs": SUMS_NAME, "mac": _mac(key.secret, sums)}
    return (json.dumps(body, sort_keys=True, indent=1) + "\n").encode()


def _mac(secret: bytes, sums: bytes) -> str:
    return hmac.new(secret, sums, hashlib.sha256).hexdigest()


def check_seal(where: str, sums: bytes, signature: bytes | None, trust: Trust) -> Seal:
    """The one check of a capsule's signature (verify and replay): parse it, and with a key,
    recompute the MAC over ``sums``.

    Raises:
        CapsuleInvalid: a malformed signature; unsigned when ``trust.require``; signed with
            another key than ``trust.key``; a MAC that does not match (exit 6).
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
    claimed_id, mac = _parse(signature)
    if trust.key is None:
        return Seal(signed=True, key_id=claimed_id, sums_sha256=sums_sha256)
    if claimed_id != trust.key.id:
        raise CapsuleInvalid(
            f"{where} is signed with key {claimed_id}, "
            f"not with the key given ({trust.key.id}, {trust.key.path})",
            member=SIGNATURE_NAME,
            hint=f"check it with the key whose id is {claimed_id}, or do not trust it",
        )
    if not hmac.compare_digest(mac, _mac(trust.key.secret, sums)):
        raise CapsuleInvalid(
            f"bad signature for key {claimed_id}: {where} changed after it was signed",
            member=SIGNATURE_NAME,
            hint="do not trust or replay it; ask its author for a fresh signed export",
        )
    return Seal(signed=True, key_id=claimed_id, checked=True, sums_sha256=sums_sha256)


def check_capsule(path: Path, trust: Trust) -> Seal:
    """`check_seal` on a capsule tar's SHA256SUMS and SIGNATURE, read in place: nothing is extracted.

    Raises:
        CapsuleInvalid: an unreadable capsule, or a signature that fails ``trust``.
    """
    sums, signature = read_seal(path)
    return check_seal(path.name, sums, signature, trust)


def _parse(signature: bytes) -> tuple[str, str]:
    """(key id, MAC hex) of a SIGNATURE member.

    Raises:
        CapsuleInvalid: not the JSON `sign` writes, or another algorithm.
    """
    try:
        body = json.loads(signature)
    except (ValueError, RecursionError) as e:
        raise CapsuleInvalid(f"{SIGNATURE_NAME} is not valid JSON", member=SIGNATURE_NAME) from e
    if not isinstance(body, dict):
        raise CapsuleInvalid(f"{SIGNATURE_NAME} is not a JSON object", member=SIGNATURE_NAME)
    algorithm, claimed_id, mac = body.get("algorithm"), body.get("key_id"), body.get("mac")
    if algorithm != ALGORITHM:
        raise CapsuleInvalid(
            f"{SIGNATURE_NAME} uses algorithm {algorithm!r}; this repro checks {ALGORITHM}",
            member=SIGNATURE_NAME,
            hint="upgrade repro, or ask for an export signed with `repro export --sign`",
        )
    if not (isinstance(claimed_id, str) and _is_hex(claimed_id, KEY_ID_HEX)) or not (
        isinstance(mac, str) and _is_hex(mac, 64)
    ):
        raise CapsuleInvalid(f"{SIGNATURE_NAME} is malformed (key_id or mac)", member=SIGNATURE_NAME)
    return claimed_id, mac


def _is_hex(value: str, length: int) -> bool:
    return len(value) == length and all(c in "0123456789abcdef" for c in value)
