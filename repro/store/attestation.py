"""Attestations of a run: an in-toto Statement v1 with a SLSA provenance v1 predicate, in a DSSE
envelope (repro/store/dsse.py) signed with an Ed25519 key.

The statement says "these files (the subjects: each stored output, by name and SHA-256) were
produced by this process from these inputs":

- ``buildDefinition``: ``buildType`` names repro's capsule format; ``externalParameters`` the
  command, its params, the seed and the determinism mode; ``resolvedDependencies`` the code (git
  commit, and the SHA-256 of the uncommitted patch; a snapshot's file list otherwise), each data
  input (repro's xxh3-128 tree digest), the lock (SHA-256) and the environment image (its id).
- ``runDetails``: the builder (repro and its version), the run id with its start and end, and as
  byproducts the SHA-256 of the capsule's SHA256SUMS (which seals every member of the capsule
  `repro export` writes) and each replay recorded for the run with its verdict.

The file is JSON Lines (``*.intoto.jsonl``): one envelope a line. Reading one is hostile input:
anything malformed is a `CapsuleInvalid` (exit 6) in one line.
"""

from __future__ import annotations

import errno
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.errors import CapsuleInvalid, NotFoundError, UsageError
from repro.store import dsse, limits
from repro.store.capsule import ATTESTATION_NAME, FORMAT, RECORD_NAME
from repro.store.hashing import sha256_file
from repro.store.record import Record, encode_manifest
from repro.store.runs import LoadedRun, Store
from repro.store.signing import SigningKey
from repro.store.tarwriter import capsule_sums
from repro.store.verify import Verified, verify_tar
from repro.units import plural

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
BUILD_TYPE = f"https://schemas.repro.invalid/{FORMAT}"  # repro's capsule format names the build
BUILDER_ID = "https://schemas.repro.invalid/builder/repro"
DATA_DIGEST = "xxh3-128"  # repro's tree digest of a data input (its files are not in the capsule)
MAX_BYTES = limits.MAX_ATTESTATION_BYTES
_HINT = dsse.DAMAGED_HINT


@dataclass(frozen=True)
class Subject:
    name: str
    sha256: str


@dataclass(frozen=True)
class Replay:
    """A replay recorded for the run: its id, verdict, and the SHA-256 of its record."""

    id: str
    verdict: str
    record_sha256: str


@dataclass(frozen=True)
class Attestation:
    """What `attest` made: the envelope, its subjects, the outputs left out, and the signing key."""

    envelope: dict[str, Any]
    statement: dict[str, Any]
    subjects: list[Subject]
    left_out: list[str] = field(default_factory=list)  # outputs not stored: no bytes to digest
    key_id: str | None = None

    def line(self) -> bytes:
        """The envelope as one JSON Lines line (deterministic: sorted keys)."""
        return (json.dumps(self.envelope, sort_keys=True, separators=(",", ":")) + "\n").encode()


@dataclass(frozen=True)
class Checked:
    """An attestation whose signature was checked: who signed it, the run, what it names."""

    key_id: str
    run_id: str | None
    subjects: list[Subject]
    capsule_sums: str | None  # SHA-256 of the capsule's SHA256SUMS it names


def replays_of(store: Store, run_id: str) -> list[Replay]:
    """The replays recorded in ``store`` for ``run_id`` that reached a verdict, oldest first."""
    found: list[Replay] = []
    for row in store.rows():
        if row.kind != "replay" or row.parent != run_id or not row.verdict:
            continue
        try:
            raw = (store.runs_dir / row.id / RECORD_NAME).read_bytes()
        except OSError:
            continue
        found.append(Replay(row.id, row.verdict, hashlib.sha256(raw).hexdigest()))
    return found


def capsule_digest(loaded: LoadedRun) -> str:
    """The SHA-256 of the run's capsule's SHA256SUMS: the one it was read from, or the one
    `repro export` writes for it (no image).

    Raises:
        CapsuleInvalid: a blob the record names is missing or replaced.
    """
    if loaded.sums_sha256:
        return loaded.sums_sha256
    return hashlib.sha256(capsule_sums(loaded.record, loaded.blob_path)).hexdigest()


def attest(loaded: LoadedRun, sums_sha256: str, replays: list[Replay], key: SigningKey | None) -> Attestation:
    """The attestation of a succeeded run whose capsule's SHA256SUMS has SHA-256 ``sums_sha256``.

    Raises:
        UsageError: the run did not succeed, or stored no output; an HMAC or public key.
        CapsuleInvalid: a blob the record names is missing or replaced.
    """
    record = loaded.record
    require_attestable(record)
    if key is not None:
        dsse.require_ed25519(key, "an attestation")
    subjects, left_out = output_subjects(record, loaded.blob_path)
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": s.name, "digest": {"sha256": s.sha256}} for s in subjects],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": _build_definition(record, loaded.read_blob),
            "runDetails": _run_details(record, sums_sha256, replays),
        },
    }
    payload = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
    envelope = dsse.seal(PAYLOAD_TYPE, payload, key)
    return Attestation(envelope, statement, subjects, left_out, key.id if key is not None else None)


def require_attestable(record: Record) -> None:
    """The one rule of what can be attested: a run that succeeded and stored an output file.

    Raises:
        UsageError: it did not succeed, or stored no output file.
    """
    if record.results.status != "succeeded":
        raise UsageError(
            f"run {record.id} {record.results.status}: an attestation vouches for what a run produced",
            hint="attest a run that succeeded (`repro ls` shows each run's status)",
        )
    if not any(o.stored and o.link is None for o in record.results.outputs):
        raise UsageError(
            f"run {record.id} stored no output file: nothing to attest",
            hint="outputs over store.max_output_bytes are hashed, not stored; raise the limit and run again",
        )


def output_subjects(record: Record, blob_path: Callable[[str], Path]) -> tuple[list[Subject], list[str]]:
    """Each stored output by name and SHA-256 (read from its blob); the paths of the others."""
    subjects: list[Subject] = []
    left_out: list[str] = []
    for entry in sorted(record.results.outputs, key=lambda e: e.path):
        if entry.link is not None:
            continue  # a link is recorded, never followed: no bytes of its own
        if not entry.stored:
            left_out.append(entry.path)
            continue
        path = blob_path(entry.hash)
        if not path.is_file():
            raise CapsuleInvalid(
                f"blob {entry.hash} of output {entry.path} is missing",
                member=str(path),
                hint="the store was pruned or damaged: this run's outputs cannot be attested",
            )
        subjects.append(Subject(entry.path, sha256_file(path)))
    return subjects, left_out


def _build_definition(record: Record, read_blob: Callable[[str | None], bytes | None]) -> dict[str, Any]:
    external = {
        "command": record.command.argv,
        "params": record.command.params,
        "seed": record.seeds.master,
        "mode": record.determinism.mode,
    }
    deps: list[dict[str, Any]] = []
    code = record.code
    if code.kind == "git" and code.commit:
        git: dict[str, Any] = {"name": "code", "digest": {"gitCommit": code.commit}}
        if code.remote:
            git["uri"] = f"git+{code.remote}"
        git["annotations"] = {"branch": code.branch, "dirty": code.dirty}
        deps.append(git)
        patch = read_blob(code.patch)
        if patch is not None:
            deps.append({"name": "code.patch", "digest": {"sha256": hashlib.sha256(patch).hexdigest()}})
        if code.untracked:  # files git does not track that the run had: their list, as a snapshot's
            untracked = hashlib.sha256(encode_manifest(code.untracked)).hexdigest()
            deps.append(
                {
                    "name": "code.untracked",
                    "digest": {"sha256": untracked},
                    "annotations": {"files": len(code.untracked)},
                }
            )
    else:  # a snapshot: its file list (path, size, xxh3-128 of each), as a data manifest is hashed
        manifest = encode_manifest([*code.files, *code.untracked])
        digest = {"sha256": hashlib.sha256(manifest).hexdigest()}
        deps.append({"name": "code", "digest": digest, "annotations": {"kind": "snapshot"}})
    for item in record.data.inputs:
        deps.append(
            {
                "name": f"data:{item.path}",
                "digest": {DATA_DIGEST: item.digest},
                "annotations": {"files": item.count, "bytes": item.size},
            }
        )
    lock = read_blob(record.deps.lock_blob)
    if lock is not None:
        name = f"lock:{record.deps.lockfile or 'requirements.lock'}"
        deps.append({"name": name, "digest": {"sha256": hashlib.sha256(lock).hexdigest()}})
    image = record.deps.image
    if image is not None and image.id:
        algorithm, _, hexdigest = image.id.partition(":")
        deps.append({"name": "image", "digest": {algorithm: hexdigest}, "annotations": {"tag": image.tag}})
    return {
        "buildType": BUILD_TYPE,
        "externalParameters": external,
        "internalParameters": {"backend": record.backend.name},
        "resolvedDependencies": deps,
    }


def _run_details(record: Record, sums_sha256: str, replays: list[Replay]) -> dict[str, Any]:
    metadata = {"invocationId": record.id}
    if record.results.started:
        metadata["startedOn"] = record.results.started
    if record.results.finished:
        metadata["finishedOn"] = record.results.finished
    capsule = {
        "name": "SHA256SUMS",
        "digest": {"sha256": sums_sha256},
        "annotations": {"format": FORMAT, "run": record.id},
    }
    replayed = [
        {
            "name": f"replay:{r.id}",
            "digest": {"sha256": r.record_sha256},
            "annotations": {"verdict": r.verdict},
        }
        for r in replays
    ]
    return {
        "builder": {"id": BUILDER_ID, "version": {"repro": record.repro_version or "unknown"}},
        "metadata": metadata,
        "byproducts": [capsule, *replayed],
    }


def read_file(path: Path) -> bytes:
    """An attestation file's bytes, bounded.

    Raises:
        NotFoundError: no such file. UsageError: unreadable. CapsuleInvalid: larger than an attestation is.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except FileNotFoundError as e:
        raise NotFoundError(
            f"no attestation file at {path}", hint="write one with `repro attest RUN -o FILE`"
        ) from e
    except OSError as e:
        why = "it is a directory" if e.errno == errno.EISDIR else (e.strerror or type(e).__name__)
        raise UsageError(f"cannot read {path}: {why}", hint="check the path and its permissions") from e
    if len(raw) > MAX_BYTES:
        raise CapsuleInvalid(
            f"{path.name} is larger than {MAX_BYTES >> 20} MiB: not an attestation", hint=_HINT
        )
    return raw


def check(raw: bytes, where: str, key: SigningKey) -> Checked:
    """Check an attestation, one DSSE envelope on one line, with ``key`` and parse its statement.
    An attestation is one statement: a file of several lines is refused whole (another run's
    genuinely signed line appended would otherwise lend its subjects to this one).

    Raises:
        CapsuleInvalid: empty, more than one line, a malformed envelope or statement, a signature
            that fails (exit 6).
        UsageError: an HMAC key.
    """
    lines = [line for line in raw.splitlines() if line.strip()]
    if not lines:
        raise CapsuleInvalid(f"{where} is empty", hint="write one with `repro attest RUN -o FILE`")
    if len(lines) > 1:
        raise CapsuleInvalid(
            f"{where} holds {len(lines)} lines: an attestation is one statement of one run",
            hint="lines were added to it; check the file `repro attest` wrote, which is one line",
        )
    opened = dsse.open_envelope(lines[0], where, PAYLOAD_TYPE, key)
    statement = dsse.json_object(opened.payload, f"{where}: the payload")
    return Checked(key.id, _invocation(statement), _parse_subjects(statement, where), _sums(statement))


def check_capsule(path: Path, key: SigningKey) -> Checked:
    """Check the attestation a capsule carries, and that it names this very capsule's SHA256SUMS
    (every member is checked against those sums first).

    Raises:
        CapsuleInvalid: a capsule that fails verification, no attestation, one that fails `check`,
            or one that names another capsule (exit 6).
    """
    return check_verified(verify_tar(path), path, key)


def check_verified(verified: Verified, path: Path, key: SigningKey) -> Checked:
    """`check_capsule` once the capsule at ``path`` is verified.

    Raises:
        CapsuleInvalid: no attestation, one that fails `check`, or one that names another capsule.
    """
    if verified.attestation is None:
        raise CapsuleInvalid(
            f"{path.name} carries no attestation",
            member=ATTESTATION_NAME,
            hint="export it with `repro export RUN --attest --sign KEYFILE`",
        )
    checked = check(verified.attestation, f"{path.name}:{ATTESTATION_NAME}", key)
    if checked.capsule_sums is None or checked.capsule_sums != hashlib.sha256(verified.sums).hexdigest():
        raise CapsuleInvalid(
            f"the attestation in {path.name} names another capsule (its SHA256SUMS differ)",
            member=ATTESTATION_NAME,
            hint="it was moved from another capsule; do not trust it for this one",
        )
    return checked


@dataclass(frozen=True)
class Summary:
    """What an attestation says before anything is checked (`repro show`): or why it cannot be read."""

    subjects: int = 0
    key_ids: list[str] = field(default_factory=list)
    problem: str | None = None


def summary(raw: bytes) -> Summary:
    """The subjects and key ids of an attestation, unchecked; never raises."""
    try:
        subjects, key_ids = 0, []
        for line in (line for line in raw.splitlines() if line.strip()):
            envelope = dsse.json_object(line, ATTESTATION_NAME)
            payload = dsse.json_object(dsse.decode_payload(envelope, ATTESTATION_NAME), ATTESTATION_NAME)
            subjects += len(_parse_subjects(payload, ATTESTATION_NAME))
            key_ids += dsse.key_ids(envelope)
    except CapsuleInvalid as e:
        return Summary(problem=e.message)
    return Summary(subjects, key_ids)


def _parse_subjects(statement: dict[str, Any], where: str) -> list[Subject]:
    """The statement's subjects, once its type and predicate type are the ones repro writes.

    Raises:
        CapsuleInvalid: another statement or predicate type; a subject without a SHA-256.
    """
    if statement.get("_type") != STATEMENT_TYPE or statement.get("predicateType") != PREDICATE_TYPE:
        raise CapsuleInvalid(
            f"{where} is not an in-toto Statement v1 with a SLSA provenance v1 predicate",
            hint="`repro attest` writes that kind; another tool's attestation is checked with that tool",
        )
    raw = statement.get("subject")
    if not isinstance(raw, list) or not raw:
        raise CapsuleInvalid(f"{where}: the statement names no subject", hint=_HINT)
    subjects: list[Subject] = []
    for item in raw:
        name = item.get("name") if isinstance(item, dict) else None
        digest = item.get("digest") if isinstance(item, dict) else None
        sha = digest.get("sha256") if isinstance(digest, dict) else None
        if not isinstance(name, str) or not (isinstance(sha, str) and is_sha256(sha)):
            raise CapsuleInvalid(f"{where}: a subject without a name and a SHA-256 digest", hint=_HINT)
        subjects.append(Subject(name, sha))
    return subjects


def _invocation(statement: dict[str, Any]) -> str | None:
    value = _dig(statement, "predicate", "runDetails", "metadata", "invocationId")
    return value if isinstance(value, str) else None


def _sums(statement: dict[str, Any]) -> str | None:
    byproducts = _dig(statement, "predicate", "runDetails", "byproducts")
    for item in byproducts if isinstance(byproducts, list) else []:
        digest = item.get("digest") if isinstance(item, dict) else None
        if item.get("name") == "SHA256SUMS" and isinstance(digest, dict):
            sha = digest.get("sha256")
            return sha if isinstance(sha, str) and is_sha256(sha) else None
    return None


def _dig(value: Any, *keys: str) -> Any:
    for k in keys:
        value = value.get(k) if isinstance(value, dict) else None
    return value


def artifact_subject(checked: Checked, path: Path) -> Subject:
    """The subject ``path``'s SHA-256 matches.

    Raises:
        NotFoundError: no such file. CapsuleInvalid: its digest is no subject's: not attested (exit 6).
    """
    if not path.is_file():
        raise NotFoundError(f"no artifact file at {path}", hint="give the file to check, e.g. model.pt")
    try:
        sha = sha256_file(path)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or type(e).__name__}") from e
    run = f"run {checked.run_id}" if checked.run_id else "the run"
    for subject in checked.subjects:
        if subject.sha256 == sha:
            return subject
    same_name = [s for s in checked.subjects if Path(s.name).name == path.name]
    if same_name:
        raise CapsuleInvalid(
            f"{path} is not attested: its SHA-256 {sha[:16]}… is not that of the {same_name[0].name} "
            f"{run} produced ({same_name[0].sha256[:16]}…)",
            hint="the file changed after the run; do not trust it as this run's output",
        )
    raise CapsuleInvalid(
        f"{path} is not attested: its SHA-256 {sha[:16]}… is none of the "
        f"{plural(len(checked.subjects), 'file')} {run} produced",
        hint="check the file against the attestation of the run that made it",
    )


def is_sha256(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)
