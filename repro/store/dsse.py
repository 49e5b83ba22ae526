"""DSSE envelopes (Dead Simple Signing Envelope, v1): sign a payload with its type, check one.

The envelope is the JSON ``{"payloadType", "payload": base64, "signatures": [{"keyid", "sig"}]}``;
each signature is over the pre-authentication encoding ``PAE(type, payload)`` =
``"DSSEv1" SP LEN(type) SP type SP LEN(payload) SP payload`` (lengths in ASCII decimal bytes), so
the type is signed with the body and neither can be swapped. Spec:
https://github.com/secure-systems-lab/dsse/blob/master/envelope.md. The keys are Ed25519 only
(repro/store/signing.py): an envelope is for others to check, and an HMAC key would let every
checker sign. Envelopes are read as hostile: every malformed field is a `CapsuleInvalid` (exit 6).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from repro.errors import CapsuleInvalid, UsageError
from repro.runtime.contract import parse_json
from repro.store import signing
from repro.store.signing import SigningKey

DAMAGED_HINT = "it is damaged or not an envelope: ask its author for a fresh one (`repro attest`)"
MAX_SIGNATURES = 16  # an envelope with more is not one repro wrote; refuse rather than try each


@dataclass(frozen=True)
class Opened:
    """An envelope whose signature by ``key_id`` was checked: its payload bytes, of ``payload_type``."""

    payload_type: str
    payload: bytes
    key_id: str


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what each signature signs."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def require_ed25519(key: SigningKey, what: str) -> None:
    """The one rule for envelope keys.

    Raises:
        UsageError: an HMAC key.
    """
    if key.algorithm == signing.HMAC:
        raise UsageError(
            f"{key.path} is an HMAC key; {what} takes an Ed25519 or ECDSA P-256 key, which others can check "
            "without being able to sign",
            hint="make one with `repro keygen --type ed25519 PATH`",
        )


def seal(payload_type: str, payload: bytes, key: SigningKey | None) -> dict[str, Any]:
    """The envelope of ``payload``, signed with ``key`` (no signatures without one).

    Raises:
        UsageError: an HMAC or public key.
    """
    signatures: list[dict[str, str]] = []
    if key is not None:
        require_ed25519(key, "an attestation")
        sig = signing.sign_bytes(key, pae(payload_type, payload))
        signatures.append({"keyid": key.id, "sig": base64.b64encode(sig).decode()})
    return {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode(),
        "signatures": signatures,
    }


def open_envelope(raw: bytes, where: str, expected_type: str, key: SigningKey) -> Opened:
    """Check an envelope's signature by ``key`` and return its payload.

    Raises:
        CapsuleInvalid: not JSON, a missing or mistyped field, bad base64, another payload type,
            no signature by this key id, or one that does not match (exit 6).
        UsageError: an HMAC key.
    """
    require_ed25519(key, "verify-attestation")
    body = json_object(raw, where)
    payload_type, sigs = body.get("payloadType"), body.get("signatures")
    if payload_type != expected_type:
        raise CapsuleInvalid(
            f"{where}: payloadType is {_shown(payload_type)}, not {expected_type}",
            hint="this is not an in-toto attestation that `repro attest` writes",
        )
    payload = decode_payload(body, where)
    if not isinstance(sigs, list) or len(sigs) > MAX_SIGNATURES:
        raise CapsuleInvalid(
            f"{where}: signatures is not a list of at most {MAX_SIGNATURES}", hint=DAMAGED_HINT
        )
    if not sigs:
        raise CapsuleInvalid(
            f"{where} is not signed", hint="ask for a signed one: `repro attest RUN --sign KEYFILE`"
        )
    claimed: list[str] = []
    for entry in sigs:
        keyid = entry.get("keyid") if isinstance(entry, dict) else None
        if not isinstance(keyid, str):
            raise CapsuleInvalid(f"{where}: a signature without a keyid", hint=DAMAGED_HINT)
        claimed.append(keyid[:40])
        if keyid != key.id:
            continue
        sig = _base64(entry.get("sig"))
        fewest, most = signing.signature_sizes(key.algorithm)
        if sig is None or not fewest <= len(sig) <= most:
            raise CapsuleInvalid(
                f"{where}: the signature of key {key.id} is not {most} bytes of base64", hint=DAMAGED_HINT
            )
        if not signing.verify_bytes(key, pae(payload_type, payload), sig):
            raise CapsuleInvalid(
                f"bad signature for {key.label}: {where} changed after it was signed",
                hint="do not trust it; ask its author for a fresh `repro attest`",
            )
        return Opened(payload_type, payload, key.id)
    raise CapsuleInvalid(
        f"{where} is signed by key {', '.join(claimed)}, not by the key given ({key.id}, {key.path})",
        hint=f"check it with the public key whose id is {claimed[0]}, or do not trust it",
    )


def decode_payload(envelope: dict[str, Any], where: str) -> bytes:
    """The payload bytes of an envelope, unchecked.

    Raises:
        CapsuleInvalid: not valid base64.
    """
    payload = _base64(envelope.get("payload"))
    if payload is None:
        raise CapsuleInvalid(f"{where}: payload is not valid base64", hint=DAMAGED_HINT)
    return payload


def _base64(value: object, length: int | None = None) -> bytes | None:
    """Standard or URL-safe base64, padded or not: the spec has verifiers accept either."""
    raw = signing.decode_base64(value, length)
    if raw is None and isinstance(value, str):
        standard = value.replace("-", "+").replace("_", "/")
        raw = signing.decode_base64(standard + "=" * (-len(standard) % 4), length)
    return raw


def key_ids(envelope: dict[str, Any]) -> list[str]:
    """The key ids an envelope's signatures claim, unchecked (shortened, never more than the bound)."""
    sigs = envelope.get("signatures")
    if not isinstance(sigs, list):
        return []
    found = (s.get("keyid") for s in sigs[:MAX_SIGNATURES] if isinstance(s, dict))
    return [k[:40] for k in found if isinstance(k, str)]


def json_object(raw: bytes, where: str) -> dict[str, Any]:
    """Parse JSON that must be an object.

    Raises:
        CapsuleInvalid: not UTF-8 JSON, or not an object.
    """
    try:
        body = parse_json(raw)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise CapsuleInvalid(f"{where} is not valid JSON (truncated or damaged?)", hint=DAMAGED_HINT) from e
    if not isinstance(body, dict):
        raise CapsuleInvalid(f"{where} is not a JSON object", hint=DAMAGED_HINT)
    return body


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
