"""What `repro push` and `repro pull` say: a line for people, an object for `--json`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from repro import schemas
from repro.units import human_bytes, plural

if TYPE_CHECKING:
    from repro.share.artifact import Pushed
    from repro.share.reference import Reference


def push_text(done: Pushed) -> str:
    """`repro push`: where the run went, what was uploaded and what the registry held already."""
    lines = [
        f"pushed {done.run} → {done.ref}: {plural(done.layers, 'layer')} ({human_bytes(done.size)}); "
        f"uploaded {plural(done.uploaded, 'blob')} ({human_bytes(done.uploaded_bytes)}), "
        f"{done.reused} already there" + (f"; image {done.image}" if done.image else "")
    ]
    if done.attestation:
        what = "model signature (OpenSSF)" if done.attestation_format == "oms" else "attestation"
        lines.append(f"{what} attached as a referrer: {done.attestation}")
    return "\n".join(lines)


def push_dict(done: Pushed) -> dict[str, Any]:
    """`repro push --json` (schemas/push.json)."""
    body = {
        "id": done.run,
        "ref": str(done.ref),
        "digest": done.ref.digest,
        "layers": done.layers,
        "bytes": done.size,
        "uploaded": done.uploaded,
        "uploaded_bytes": done.uploaded_bytes,
        "reused": done.reused,
        "image": done.image,
        "referrer": done.attestation,
        "referrer_format": done.attestation_format,
    }
    return schemas.answer("push", body)


def pull_dict(run_id: str, ref: Reference, digest: str, image: bool) -> dict[str, Any]:
    """`repro pull --json` (schemas/pull.json)."""
    return schemas.answer("pull", {"id": run_id, "ref": str(ref), "digest": digest, "image": image})
