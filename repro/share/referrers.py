"""Statements about a pushed run attached the way signing tools attach theirs: an OCI 1.1 referrer,
a manifest whose ``subject`` is the run's manifest, listed where a client finds it.

The distribution 2.x server has no referrers API, so the referrer is also listed under the OCI 1.1
referrers tag schema: the tag ``sha256-<hex of the subject>`` holds an image index of the subject's
referrers, which a client reads, extends and writes back (a referrer already listed is kept once).
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from typing import Any

from repro.errors import NotFoundError
from repro.share.client import Registry

INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
ATTESTATION_TYPE = "application/vnd.dsse.envelope.v1+json"  # an in-toto statement in a DSSE envelope
EMPTY_DIGEST = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"


@dataclass(frozen=True)
class Attached:
    """A statement about a run attached to its pushed manifest as a referrer."""

    format: str  # intoto (SLSA provenance) or oms (an OpenSSF model signature)
    artifact_type: str  # the referrer's artifactType and its layer's media type
    payload: bytes


def _digest(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def referrer_manifest(subject: str, subject_size: int, artifact_type: str, payload: bytes) -> bytes:
    """A referrer of ``subject`` (a manifest digest) carrying ``payload`` as its one layer; deterministic."""
    doc: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "artifactType": artifact_type,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": EMPTY_DIGEST, "size": 2},
        "layers": [{"mediaType": artifact_type, "digest": _digest(payload), "size": len(payload)}],
        "subject": {"mediaType": MANIFEST_TYPE, "digest": subject, "size": subject_size},
    }
    return json.dumps(doc, indent=2, sort_keys=True).encode()


def attach(registry: Registry, subject: str, subject_size: int, artifact_type: str, payload: bytes) -> str:
    """Attach ``payload`` to the manifest ``subject`` in ``registry``'s repository as a referrer, listed
    under the referrers tag; the referrer's digest.

    Raises:
        RegistryRefused, RegistryUnavailable: the registry refused or did not answer.
    """
    for blob in (b"{}", payload):
        if not registry.has_blob(_digest(blob)):
            registry.put_blob(_digest(blob), len(blob), io.BytesIO(blob))
    body = referrer_manifest(subject, subject_size, artifact_type, payload)
    digest = _digest(body)
    registry.put_manifest(digest, body, MANIFEST_TYPE)
    tag = subject.replace(":", "-")
    index = _index(registry, tag)
    if all(entry.get("digest") != digest for entry in index["manifests"]):
        entry = {
            "mediaType": MANIFEST_TYPE,
            "digest": digest,
            "size": len(body),
            "artifactType": artifact_type,
        }
        index["manifests"].append(entry)
        registry.put_manifest(tag, json.dumps(index, indent=2, sort_keys=True).encode(), INDEX_TYPE)
    return digest


def _index(registry: Registry, tag: str) -> dict[str, Any]:
    """The index under the referrers tag, or a new empty one (an unreadable one is started afresh,
    as the referrers tag schema says a client does)."""
    try:
        raw = registry.get_manifest_at(tag, INDEX_TYPE)
        doc = json.loads(raw)
    except NotFoundError:
        doc = None
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("manifests"), list):
        return {"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": []}
    return doc
