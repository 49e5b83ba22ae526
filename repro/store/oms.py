"""OpenSSF Model Signing (OMS) v1 signatures of a run's model files, in the format its reference
verifier (`model_signing verify key`) checks with a public key.

The signature is a Sigstore bundle (v0.3 JSON) holding a DSSE envelope over an in-toto Statement
v1 whose predicate (``https://model_signing/signature/v1.0``) lists every model file by relative
path and SHA-256 (``resources``, sorted by name), serialized file by file (``method: files``); the
one subject is the model, named by the run id, whose digest is the SHA-256 of the resources'
digests in that order. The model files are the run's stored outputs, as `repro get RUN -o DIR`
writes them: the verifier hashes DIR and demands exactly these files.

Signing takes an ECDSA P-256 key (`repro keygen --type ecdsa-p256`): the reference verifier checks
elliptic-curve keys, not Ed25519. The key is named in the bundle by the SHA-256 of its public PEM
(``verificationMaterial.publicKey.hint``); no transparency log, no certificate. The SLSA
provenance statement (`repro.store.attestation`) stays as it is: this bundle covers the model
files only. Reading one is hostile input: anything malformed is a `CapsuleInvalid` (exit 6).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.errors import CapsuleInvalid, UsageError
from repro.runtime.contract import parse_json
from repro.store import attestation, dsse, signing
from repro.store.attestation import Checked, Subject
from repro.store.capsule import MODEL_SIGNATURE_NAME
from repro.store.runs import LoadedRun
from repro.store.signing import SigningKey
from repro.store.verify import verify_tar

BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
PREDICATE_TYPE = "https://model_signing/signature/v1.0"
PAYLOAD_TYPE = attestation.PAYLOAD_TYPE  # an in-toto statement, as the SLSA one
SERIALIZATION = {
    "method": "files",
    "hash_type": "sha256",
    "allow_symlinks": False,
    "ignore_paths": [".git", ".gitattributes", ".github", ".gitignore"],  # what the reference tool skips
}
WHAT = "OpenSSF model signature"  # how messages name one
KEY_HINT = "make one with `repro keygen --type ecdsa-p256 PATH`: OMS verifiers check elliptic-curve keys"
_DAMAGED = "this is not an OMS model signature that `repro attest --format oms` writes, or it was damaged"


@dataclass(frozen=True)
class Signed:
    """What `sign_run` made: the bundle's bytes, the files it covers, the outputs left out."""

    bundle: bytes
    subjects: list[Subject]
    key_id: str
    left_out: list[str] = field(default_factory=list)


def require_oms_key(key: SigningKey) -> None:
    """The one rule for OMS signing keys.

    Raises:
        UsageError: not an ECDSA P-256 key.
    """
    if key.algorithm != signing.ECDSA_P256:
        raise UsageError(
            f"{key.path} is an {key.algorithm} key; an OMS model signature takes ECDSA P-256", hint=KEY_HINT
        )


def sign_run(loaded: LoadedRun, key: SigningKey) -> Signed:
    """The OMS bundle over the stored outputs of a succeeded run, signed with ``key``.

    Raises:
        UsageError: the run cannot be attested; a key that is not an ECDSA P-256 private key.
        CapsuleInvalid: an output's blob is missing or replaced.
    """
    attestation.require_attestable(loaded.record)
    require_oms_key(key)
    subjects, left_out = attestation.output_subjects(loaded.record, loaded.blob_path)
    payload = json.dumps(statement(loaded.record.id, subjects), sort_keys=True, indent=2).encode()
    sig = signing.sign_bytes(key, dsse.pae(PAYLOAD_TYPE, payload))
    bundle = {
        "mediaType": BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {"publicKey": {"hint": key_hint(key)}, "tlogEntries": []},
        "dsseEnvelope": {
            "payload": base64.b64encode(payload).decode(),
            "payloadType": PAYLOAD_TYPE,
            "signatures": [{"sig": base64.b64encode(sig).decode(), "keyid": ""}],
        },
    }
    raw = (json.dumps(bundle, sort_keys=True, indent=2) + "\n").encode()
    return Signed(raw, subjects, key.id, left_out)


def statement(model: str, subjects: list[Subject]) -> dict[str, Any]:
    """The in-toto statement of an OMS v1 signature over these files (sorted by name here)."""
    files = sorted(subjects, key=lambda s: s.name)
    return {
        "_type": attestation.STATEMENT_TYPE,
        "subject": [{"name": model, "digest": {"sha256": root_digest(files)}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "serialization": SERIALIZATION,
            "resources": [{"name": s.name, "algorithm": "sha256", "digest": s.sha256} for s in files],
        },
    }


def root_digest(files: list[Subject]) -> str:
    """The model's digest: SHA-256 over the files' raw SHA-256 digests, in the order listed."""
    hasher = hashlib.sha256()
    for s in files:
        hasher.update(bytes.fromhex(s.sha256))
    return hasher.hexdigest()


def key_hint(key: SigningKey) -> str:
    """How a bundle names its key: the SHA-256 of the public key's PEM (as the reference signer does)."""
    return hashlib.sha256(signing.public_pem(key)).hexdigest()


def is_bundle(raw: bytes) -> bool:
    """Whether ``raw`` reads as a Sigstore bundle (JSON naming the bundle media type), unchecked."""
    if not raw.lstrip().startswith(b"{"):
        return False
    try:
        body = parse_json(raw)
    except (ValueError, RecursionError):
        return False
    media = body.get("mediaType") if isinstance(body, dict) else None
    return isinstance(media, str) and media.startswith("application/vnd.dev.sigstore.bundle")


def check(raw: bytes, where: str, key: SigningKey) -> Checked:
    """Check an OMS bundle's signature with the public ``key`` and read the files it covers.

    Raises:
        CapsuleInvalid: malformed, signed with another key, a signature that fails, another
            predicate, or resources that do not add up to the subject's digest (exit 6).
        UsageError: a key that is not ECDSA P-256.
    """
    require_oms_key(key)
    body = dsse.json_object(raw, where)
    hint = _dig(body, "verificationMaterial", "publicKey", "hint")
    if hint and hint != key_hint(key):
        raise CapsuleInvalid(
            f"{where} is signed with another key (hint {str(hint)[:16]}…), not {key.label} ({key.path})",
            hint="check it with the public key of whoever signed it, or do not trust it",
        )
    envelope = body.get("dsseEnvelope")
    if not isinstance(envelope, dict) or envelope.get("payloadType") != PAYLOAD_TYPE:
        raise CapsuleInvalid(f"{where}: no DSSE envelope of an in-toto statement", hint=_DAMAGED)
    payload = dsse.decode_payload(envelope, where)
    sigs = envelope.get("signatures")
    sig = (
        signing.decode_base64(sigs[0].get("sig"))
        if isinstance(sigs, list) and sigs and isinstance(sigs[0], dict)
        else None
    )
    if sig is None:
        raise CapsuleInvalid(f"{where} is not signed", hint=_DAMAGED)
    if not signing.verify_bytes(key, dsse.pae(PAYLOAD_TYPE, payload), sig):
        raise CapsuleInvalid(
            f"bad signature for {key.label}: {where} changed after it was signed, or another key signed it",
            hint="do not trust the model it names; ask its author for a fresh signature",
        )
    return _parse_statement(dsse.json_object(payload, f"{where}: the payload"), where, key)


def check_capsule(path: Path, key: SigningKey) -> tuple[Checked, str]:
    """Check what a capsule carries (every member first): its OMS model signature when it holds
    one and no in-toto attestation, else its attestation (`attestation.check_verified`); and
    what was checked, for messages.

    Raises:
        CapsuleInvalid: a capsule that fails verification, carries neither, or one that fails.
    """
    verified = verify_tar(path)
    if verified.model_signature is None or verified.attestation is not None:
        return attestation.check_verified(verified, path, key), "attestation"
    return check(verified.model_signature, f"{path.name}:{MODEL_SIGNATURE_NAME}", key), WHAT


def summary(raw: bytes) -> attestation.Summary:
    """How many files an OMS bundle lists and the key hint it names, unchecked (`repro show`); never
    raises."""
    where = MODEL_SIGNATURE_NAME
    try:
        body = dsse.json_object(raw, where)
        envelope = body.get("dsseEnvelope")
        if not isinstance(envelope, dict):
            return attestation.Summary(problem=f"{where}: no DSSE envelope")
        payload = dsse.json_object(dsse.decode_payload(envelope, where), where)
    except CapsuleInvalid as e:
        return attestation.Summary(problem=e.message)
    resources = _dig(payload, "predicate", "resources")
    hint = _dig(body, "verificationMaterial", "publicKey", "hint")
    return attestation.Summary(
        len(resources) if isinstance(resources, list) else 0, [hint[:16]] if isinstance(hint, str) else []
    )


def _parse_statement(payload: dict[str, Any], where: str, key: SigningKey) -> Checked:
    """The files an OMS v1 statement lists, checked against its subject's digest.

    Raises:
        CapsuleInvalid: another statement or predicate type, malformed resources, or a digest mismatch.
    """
    if payload.get("_type") != attestation.STATEMENT_TYPE or payload.get("predicateType") != PREDICATE_TYPE:
        raise CapsuleInvalid(f"{where}: not an OMS v1 model signature statement", hint=_DAMAGED)
    subject = payload.get("subject")
    resources = _dig(payload, "predicate", "resources")
    if not (isinstance(subject, list) and len(subject) == 1 and isinstance(resources, list)):
        raise CapsuleInvalid(f"{where}: a model signature names one model and a list of files", hint=_DAMAGED)
    files: list[Subject] = []
    for entry in resources:
        if not (isinstance(entry, dict) and entry.get("algorithm") == "sha256"):
            raise CapsuleInvalid(f"{where}: a file without a SHA-256 digest", hint=_DAMAGED)
        name, digest = entry.get("name"), entry.get("digest")
        if not (isinstance(name, str) and isinstance(digest, str) and attestation.is_sha256(digest)):
            raise CapsuleInvalid(f"{where}: a malformed file entry", hint=_DAMAGED)
        files.append(Subject(name, digest))
    if _dig(subject[0], "digest", "sha256") != root_digest(files):
        raise CapsuleInvalid(f"{where}: its files do not add up to the model's digest", hint=_DAMAGED)
    model = _dig(subject[0], "name")
    return Checked(key.id, model if isinstance(model, str) else None, files, None)


def _dig(value: Any, *keys: str) -> Any:
    for k in keys:
        value = value.get(k) if isinstance(value, dict) else None
    return value
