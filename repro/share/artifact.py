"""A run as an OCI 1.1 artifact, pushed and pulled.

The manifest is an ordinary OCI image manifest whose ``artifactType`` names a repro run: its config is
the empty descriptor, its layers the members of the run's capsule in the capsule's order (the record,
each blob by its content name, the lock), each titled with its member name
(``org.opencontainers.image.title``) and addressed by its SHA-256. The same run pushed twice gives
the same manifest; a sibling run uploads only the blobs the registry does not hold yet.

Pulled, nothing is trusted by its name: the manifest is bounded, every layer is checked against its
digest as it streams, and the members are put back into a capsule tar that is then verified as any
capsule from elsewhere is (`repro.store.verify`: safe names, bounds, each blob against its content
name, the record's format).
"""

from __future__ import annotations

import atexit
import hashlib
import io
import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.errors import CapsuleInvalid
from repro.share.client import Registry
from repro.share.image import pull_image, push_image
from repro.share.reference import Reference
from repro.share.referrers import Attached, attach
from repro.store import limits
from repro.store.capsule import FORMAT, IMAGE_MEMBER, RECORD_NAME
from repro.store.hashing import sha256_file
from repro.store.recordio import load_record
from repro.store.runs import LoadedRun, Store
from repro.store.tarwriter import members, pack_files

ARTIFACT_TYPE = "application/vnd.repro.run.v1"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
RECORD_TYPE = "application/vnd.repro.record.v1+yaml"
MEMBER_TYPE = "application/vnd.repro.member.v1"
EMPTY_DIGEST = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"  # of b"{}"
EMPTY = {"mediaType": "application/vnd.oci.empty.v1+json", "size": 2,
         "digest": EMPTY_DIGEST}  # fmt: skip
TITLE = "org.opencontainers.image.title"
RUN_ID = "dev.repro.run.id"
IMAGE_DIGEST = (
    "dev.repro.image.manifest"  # the run's image, an ordinary image manifest in the same repository
)
IMAGE_ID = "dev.repro.image.id"


@dataclass
class Pushed:
    """What `push_run` did."""

    ref: Reference  # with the manifest's digest
    run: str
    layers: int
    uploaded: int  # blobs sent
    uploaded_bytes: int
    reused: int  # blobs the registry already held
    size: int  # bytes of every layer
    image: str | None = None  # the digest of the image manifest pushed with it
    attestation: str | None = None  # the digest of the attestation attached to it as a referrer
    attestation_format: str | None = None  # intoto or oms


@dataclass
class _Layer:
    name: str
    source: Path | bytes
    digest: str
    size: int


def _layer(name: str, source: Path | bytes) -> _Layer:
    if isinstance(source, bytes):
        return _Layer(name, source, "sha256:" + hashlib.sha256(source).hexdigest(), len(source))
    h = hashlib.sha256()
    with open(source, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return _Layer(name, source, "sha256:" + h.hexdigest(), source.stat().st_size)


def manifest(run_id: str, layers: list[tuple[str, str, int]], image: dict[str, str] | None = None) -> bytes:
    """The artifact's manifest for layers (member name, sha256 digest, size), with ``image`` the
    annotations naming the run's image manifest by digest; deterministic bytes."""
    body: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "artifactType": ARTIFACT_TYPE,
        "config": EMPTY,
        "layers": [
            {
                "mediaType": RECORD_TYPE if name == RECORD_NAME else MEMBER_TYPE,
                "digest": digest,
                "size": size,
                "annotations": {TITLE: name},
            }
            for name, digest, size in layers
        ],  # fmt: skip
        "annotations": {RUN_ID: run_id, "dev.repro.capsule.format": FORMAT, **(image or {})},
    }
    return json.dumps(body, indent=2, sort_keys=True).encode()


def push_run(
    loaded: LoadedRun,
    ref: Reference,
    data: dict[str, Path] | None = None,
    attestation: Attached | None = None,
    insecure: tuple[str, ...] = (),
) -> Pushed:
    """Push ``loaded`` (with ``data``: the declared inputs' blobs) to ``ref``; only blobs the registry
    lacks are sent. A docker run's image goes along (`push_image`); ``attestation`` (a DSSE line, or
    an OMS bundle) is attached to the run's manifest as a referrer. ``insecure``: the registries
    plain HTTP may be spoken to besides those on this machine.

    Raises:
        CapsuleInvalid: a blob of the run is missing from the store, or replaced.
        RegistryRefused, RegistryUnavailable: the registry refused or did not answer.
    """
    registry = Registry(ref, push=True, insecure=insecure)
    layers = [_layer(name, src) for name, src in members(loaded.record, loaded.blob_path, data)]
    done = Pushed(ref, loaded.record.id, len(layers), 0, 0, 0, sum(layer.size for layer in layers))
    for layer in [_Layer("", b"{}", EMPTY_DIGEST, 2), *layers]:
        if registry.has_blob(layer.digest):
            done.reused += 1 if layer.name else 0
            continue
        if isinstance(layer.source, bytes):
            registry.put_blob(layer.digest, layer.size, io.BytesIO(layer.source))
        else:
            with open(layer.source, "rb") as f:
                registry.put_blob(layer.digest, layer.size, f)
        if layer.name:
            done.uploaded += 1
            done.uploaded_bytes += layer.size
    image = loaded.record.deps.image
    pushed_image = None
    if image is not None and image.id:
        with tempfile.TemporaryDirectory(prefix="repro-push-") as work:
            pushed_image = push_image(registry, image.id, image.tag, Path(work))
        done.image = pushed_image.digest
        done.uploaded_bytes += pushed_image.uploaded
    named = {IMAGE_DIGEST: pushed_image.digest, IMAGE_ID: str(image.id)} if pushed_image and image else {}
    body = manifest(loaded.record.id, [(layer.name, layer.digest, layer.size) for layer in layers], named)
    registry.put_manifest(ref.reference, body, MANIFEST_TYPE)
    done.ref = ref.with_digest("sha256:" + hashlib.sha256(body).hexdigest())
    if attestation is not None:  # a referrer of the run's manifest, as signing tools attach theirs
        subject, kind = str(done.ref.digest), attestation.artifact_type
        done.attestation = attach(registry, subject, len(body), kind, attestation.payload)
        done.attestation_format = attestation.format
    return done


def _titled_layers(body: bytes, ref: Reference) -> list[tuple[str, str, int]]:
    """The layers (member name, digest, size) of a manifest served for ``ref``, refused unless it is a
    repro run's.

    Raises:
        CapsuleInvalid: not JSON, not a repro run artifact, or a layer without a name, digest or size.
    """
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise CapsuleInvalid(f"the manifest of {ref} is not JSON") from e
    if not isinstance(doc, dict) or doc.get("artifactType") != ARTIFACT_TYPE:
        kind = (
            doc.get("artifactType") or doc.get("config", {}).get("mediaType")
            if isinstance(doc, dict)
            else None
        )
        raise CapsuleInvalid(
            f"{ref} is not a repro run (its type is {kind or 'unknown'})",
            hint="name a reference `repro push` wrote",
        )
    raw = doc.get("layers")
    if not isinstance(raw, list) or not 0 < len(raw) <= limits.MAX_MEMBERS:
        raise CapsuleInvalid(f"the manifest of {ref} lists no layers, or too many")
    found: list[tuple[str, str, int]] = []
    for entry in raw:
        title = _field(_field(entry, "annotations"), TITLE)
        digest, size = (entry.get("digest"), entry.get("size")) if isinstance(entry, dict) else (None, None)
        if not isinstance(title, str) or not isinstance(digest, str) or not isinstance(size, int) or size < 0:
            raise CapsuleInvalid(f"the manifest of {ref} has a layer without a title, digest or size")
        if not digest.startswith("sha256:") or not limits.is_digest(digest.removeprefix("sha256:")):
            raise CapsuleInvalid(
                f"the manifest of {ref} names a layer {digest!r} that is not a sha256 digest"
            )
        found.append((title, digest, size))
    if len({title for title, _, _ in found}) != len(found):
        raise CapsuleInvalid(f"the manifest of {ref} names a member twice")
    return found


def pull_capsule(ref: Reference, scratch: Path, insecure: tuple[str, ...] = ()) -> tuple[Path, str]:
    """Bring the run ``ref`` names into a capsule tar under ``scratch``, every layer checked against its
    digest; the tar's path and the manifest's digest.

    Raises:
        NotFoundError: no such reference. CapsuleInvalid: not a repro run, or bytes that do not match.
        RegistryRefused, RegistryUnavailable: the registry refused or did not answer.
    """
    registry = Registry(ref, insecure=insecure)
    body = registry.get_manifest()
    layers = _titled_layers(body, ref)
    files: list[tuple[str, Path, str]] = []
    for title, digest, size in layers:
        path = scratch / digest.removeprefix("sha256:")
        if not path.exists():  # the same bytes under two names are fetched once
            registry.get_blob(digest, size, path)
        files.append((title, path, digest.removeprefix("sha256:")))
    image_digest = _image_digest(body)
    if image_digest is not None:  # by digest, from the repository the user named: never from elsewhere
        named = Registry(ref.with_digest(image_digest), insecure=insecure)
        record_image = _recorded_image(files)
        archive = pull_image(named, record_image, scratch)
        files.append((IMAGE_MEMBER, archive, sha256_file(archive)))
    tar = pack_files(files, scratch / (re.sub(r"[^A-Za-z0-9._-]+", "_", str(ref)) + ".tar"))
    for _, path, _ in files:
        path.unlink(missing_ok=True)
    return tar, "sha256:" + hashlib.sha256(body).hexdigest()


def open_remote(store: Store, raw: str, insecure: tuple[str, ...] = ()) -> LoadedRun:
    """The run an ``oci://`` ref names, pulled into a scratch capsule and verified (`Store.open_capsule`);
    not yet in the store.

    Raises:
        As `open_pulled`.
    """
    return open_pulled(store, raw, insecure)[0]


def open_pulled(store: Store, raw: str, insecure: tuple[str, ...] = ()) -> tuple[LoadedRun, str]:
    """`open_remote`'s run and the digest of the manifest it came from (what the tag named then).

    Raises:
        UsageError: not a registry reference. NotFoundError, CapsuleInvalid, RegistryRefused,
            RegistryUnavailable: as `pull_capsule`.
    """
    from repro.share.reference import parse

    ref = parse(raw)
    scratch = Path(tempfile.mkdtemp(prefix="repro-pull-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    try:
        tar, digest = pull_capsule(ref, scratch, insecure)
        loaded = store.open_capsule(tar)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return loaded, digest


def _image_digest(body: bytes) -> str | None:
    """The digest of the image manifest a run's manifest names, if it names one (a sha256 digest)."""
    found = _field(_field(json.loads(body), "annotations"), IMAGE_DIGEST)
    if found is None:
        return None
    if not isinstance(found, str) or not found.startswith("sha256:") or not limits.is_digest(found[7:]):
        raise CapsuleInvalid(f"the run's manifest names an image {found!r} that is not a sha256 digest")
    return found


def _recorded_image(files: list[tuple[str, Path, str]]) -> str:
    """The image id the pulled record names (its bytes were checked against their digest).

    Raises:
        CapsuleInvalid: the record names no image while the manifest does.
    """
    path = next(path for name, path, _ in files if name == RECORD_NAME)
    image = load_record(path.read_bytes()).deps.image
    if image is None or not image.id:
        raise CapsuleInvalid("the run's manifest names an image its record does not")
    return image.id


def _field(doc: object, name: str) -> Any:
    """``doc[name]`` when ``doc`` is a JSON object, else None: a stranger's manifest is any JSON."""
    return doc.get(name) if isinstance(doc, dict) else None
