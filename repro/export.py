"""`repro export`: a run as one capsule tar, optionally carrying its environment image, or as the
input of a cluster engine; each way is an entry of `EXPORTERS` (name, help line, function).

The capsule is written into a hidden working directory beside the destination,
``.<name>.repro-export-<pid>/`` (the image archive `docker save` writes, then the capsule), and
renamed onto the destination once complete: a reader sees the old file or the whole new one.
Before that directory exists, a note naming it is left in the store (``.repro/exports/``), so
`repro gc` finds and removes what an export killed with SIGKILL left behind, wherever it wrote,
once its process is gone. A failed write (a full disk) names the destination and leaves nothing.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from repro.errors import CapsuleInvalid, SecretsInOutputs, UsageError, from_os_error
from repro.store import atomic
from repro.store.capsule import ATTESTATION_NAME, MODEL_SIGNATURE_NAME, blob_member
from repro.store.processes import pid_alive
from repro.units import human_bytes, plural

if TYPE_CHECKING:  # a plain export imports none of what signing, attesting or carrying data needs
    from repro.store import datablobs
    from repro.store.record import Record
    from repro.store.runs import LoadedRun, Store
    from repro.store.signing import SigningKey

NOTES_DIR = "exports"  # under .repro/: one note per export in progress
_WORK = re.compile(r"^\.(?P<name>.+)\.repro-export-(?P<pid>\d+)$")  # the working directory's name


@dataclass
class Exported:
    """What an export wrote."""

    path: Path
    size: int
    image_size: int | None = None  # bytes of the image archive inside, when carried
    key_id: str | None = None  # the key it was signed with, when signed
    attested: str | None = None  # the format of the attestation it carries (intoto or oms), if any
    key_label: str | None = None  # that key, as named to people
    data_size: int | None = None  # bytes of declared data carried inside, when carried


@dataclass
class CarriedData:
    """What `repro export --with-data` puts into a capsule besides the run's own blobs."""

    blobs: dict[str, Path]  # digest → the file its bytes are read from
    files: int  # data files of the run's inputs
    size: int  # bytes the carried blobs add to the capsule (each distinct content once)


@dataclass
class Leftover:
    """What an export whose process died left: its working directory beside the destination."""

    note: Path  # in the store
    work: Path | None  # the hidden directory, when it still exists (None: only the note is left)
    size: int  # bytes in it


def export_run(
    loaded: LoadedRun,
    dest: Path,
    store: Store,
    with_image: bool = False,
    key: SigningKey | None = None,
    attest: bool = False,
    data: CarriedData | None = None,
    attest_format: str = "intoto",
) -> Exported:
    """Write ``loaded`` as a capsule tar at ``dest``; with ``with_image``, its image goes inside;
    with ``key``, a SIGNATURE member seals its SHA256SUMS; with ``attest``, the run's attestation
    (naming those SHA256SUMS, signed with ``key``) goes inside, or with ``attest_format`` "oms" the
    OpenSSF Model Signing bundle of its model files (MODEL_SIGNATURE.sig); with ``data`` (`carried_data`), the
    declared inputs' files go inside as blobs. ``store`` keeps the note `repro gc` finds if the export
    is killed.

    Raises:
        UsageError: ``with_image`` for a run that recorded no image (the local backend);
            ``attest`` for a run that cannot be attested, or with an HMAC key (oms: without an
            ECDSA P-256 key).
        BackendUnavailable: the run's engine (Docker, Podman) is not usable. NotFoundError: it lost the image.
        CapsuleInvalid: a blob the record names is missing from the store, or replaced.
        OSFailure: the capsule could not be written (a full disk), naming ``dest``.
    """
    image = loaded.record.deps.image
    if with_image and (image is None or not image.id):
        raise UsageError(
            f"run {loaded.record.id} ran on the {loaded.record.backend.name} backend: "
            "it has no image to carry",
            hint="export it without --with-image, or run it with --backend docker",
        )
    from repro.store.tarwriter import pack

    signer = None
    if key is not None:
        from repro.store import signing

        signer = functools.partial(signing.sign, key)
    attester = _attester(loaded, store, key, attest_format) if attest else None
    image_size: int | None = None
    work = _work_path(dest)
    try:
        with _working_dir(store, dest, work):
            archive = None
            if with_image:
                from repro.backends import registry

                archive = work / "image.tar"
                image_size = registry.save_image(loaded.record, archive)
            carried = data.blobs if data is not None else None
            written = pack(
                loaded.record, loaded.unchecked_file, work / "capsule.tar", archive, signer, attester, carried
            )
            os.replace(written, dest)
    except OSError as e:  # name the destination: a failed write() names no file, the rest our own
        ours = e.filename is None or Path(os.fsdecode(e.filename)).is_relative_to(work)
        raise from_os_error(_unnamed(e) if ours else e, dest) from e
    key_id = key.id if key is not None else None
    return Exported(dest, dest.stat().st_size, image_size, key_id, attest_format if attest else None)


def refuse_secrets_in_outputs(loaded: LoadedRun, store: Store) -> None:
    """Refuse to hand over a run whose outputs hold a credential (`secrets.outputs`), read from the
    cache the run's seal filled (a capsule's outputs are read once, then cached too).

    Raises:
        SecretsInOutputs: naming the files and what each holds.
        CapsuleInvalid: an output blob whose bytes do not match its name.
    """
    from repro.facts.secrets.outputs import OUTPUT_VERDICTS_DB, output_secrets

    entries = [(e.path, e.hash) for e in loaded.record.results.outputs if e.stored and e.hash]
    found = output_secrets(entries, loaded.blob_path, store.cache_dir / OUTPUT_VERDICTS_DB)
    if found:
        raise SecretsInOutputs(loaded.record.id, [(f.path, f.kind) for f in found])


def carried_data(loaded: LoadedRun, store: Store, remote: Path | None, limit: int) -> CarriedData:
    """The blobs of the run's declared data, found by hash in the capsule, the store or the data
    remote, else read from the project (checked against the record; with a data ``remote``, written
    there first so other projects find them), within ``limit`` bytes.

    Raises:
        UsageError: no declared data; the data is over ``limit``; a file is neither kept as a blob nor
            here as recorded.
        CapsuleInvalid: a manifest blob is missing; a kept blob does not match its name.
        OSFailure: a blob could not be written to the remote.
    """
    from repro.store import datablobs
    from repro.store.hashing import hash_file

    record = loaded.record
    if not record.data.inputs:
        raise UsageError(
            f"run {record.id} declared no data: there is nothing to carry",
            hint="export it without --with-data; declare data with --data PATH (or `data:` in repro.yaml)",
        )
    own = record.blobs()
    roots = data_roots(loaded, store, remote)
    wanted = {d: s for d, s in datablobs.data_blobs(record, loaded.read_blob).items() if d not in own}
    datablobs.check_size(sum(wanted.values()), limit, "--max-data-size")
    entries = [f for _, files in datablobs.inputs_files(record, loaded.read_blob) for f in files]
    where = {f.hash: f.path for f in entries}
    blobs: dict[str, Path] = {}
    for digest in sorted(wanted):
        found = roots.find(digest)
        if found is not None:
            blobs[digest] = found[1]
            continue
        source = store.root / where[digest]
        if not source.is_file() or hash_file(source) != digest:
            raise UsageError(
                f"data file {where[digest]} of run {record.id} is not here as recorded, and no copy of it "
                "is kept",
                hint="put the recorded data back in the project, or export without --with-data",
            )
        blobs[digest] = _into_remote(source, digest, remote) if remote is not None else source
    return CarriedData(blobs, len(entries), sum(wanted.values()))


def data_roots(loaded: LoadedRun, store: Store, remote: Path | None) -> datablobs.BlobRoots:
    """Where the blobs of ``loaded``'s data may lie: its capsule, the store, the data remote."""
    from repro.store import datablobs

    return datablobs.blob_roots(loaded.blob_root if loaded.from_capsule else None, store.dir, remote)


def _into_remote(source: Path, digest: str, remote: Path) -> Path:
    """``source`` as a blob of the data remote.

    Raises:
        CapsuleInvalid: it changed while it was copied. OSFailure: the remote could not be written.
    """
    from repro.store import datablobs

    try:
        return datablobs.put(source, digest, remote)
    except CapsuleInvalid:
        raise
    except OSError as e:
        raise from_os_error(e, remote / blob_member(digest)) from e


def _attester(
    loaded: LoadedRun, store: Store, key: SigningKey | None, attest_format: str
) -> Callable[[bytes], tuple[str, bytes]]:
    """What makes the attestation member (its name and bytes) from the capsule's SHA256SUMS, once
    the run and key are found fit for one (before anything is written).

    Raises:
        UsageError: a run that cannot be attested; an HMAC key; for oms, no key or not ECDSA P-256.
    """
    from repro.store import attestation, dsse, oms

    attestation.require_attestable(loaded.record)
    if attest_format == "oms":
        if key is None:
            raise UsageError("--attest --format oms signs the model files: it needs --sign KEYFILE",
                             hint=f"--sign KEYFILE; {oms.KEY_HINT}")  # fmt: skip
        oms.require_oms_key(key)
        bundle = oms.sign_run(loaded, key).bundle  # the model files do not depend on SHA256SUMS
        return lambda sums: (MODEL_SIGNATURE_NAME, bundle)
    if key is not None:
        dsse.require_ed25519(key, "--attest")
    replays = attestation.replays_of(store, loaded.record.id)

    def attester(sums: bytes) -> tuple[str, bytes]:
        line = attestation.attest(loaded, hashlib.sha256(sums).hexdigest(), replays, key).line()
        return ATTESTATION_NAME, line

    return attester


def _work_path(dest: Path) -> Path:
    """The export's hidden working directory: beside ``dest``, on the same file system, so the
    capsule is renamed onto ``dest`` in one step."""
    return dest.parent.resolve() / f".{dest.name}.repro-export-{os.getpid()}"


def _unnamed(e: OSError) -> OSError:
    """The error without the path of a file inside the working directory (the user never named it)."""
    return OSError(e.errno, e.strerror) if e.errno is not None else OSError(str(e))


@contextlib.contextmanager
def _working_dir(store: Store, dest: Path, work: Path) -> Iterator[Path]:
    """``work``, made fresh and noted in the store while it exists; removed with all it holds
    however the block ends."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    store.ensure()
    note = store.dir / NOTES_DIR / f"{os.getpid()}-{os.urandom(4).hex()}.json"
    try:
        atomic.write_bytes(note, json.dumps({"pid": os.getpid(), "work": str(work)}).encode())
    except OSError as e:  # the store's disk, not the destination's
        raise from_os_error(e, note) from e
    try:
        shutil.rmtree(work, ignore_errors=True)  # a dead export of an earlier process with this pid
        work.mkdir()
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
        note.unlink(missing_ok=True)


def leftovers(store: Store) -> list[Leftover]:
    """The working directories of exports whose process is gone (killed, the machine rebooted).

    Only a directory named like an export's (``.<name>.repro-export-<pid>``, that pid the note's)
    counts: a note is never a licence to remove anything else.
    """
    found: list[Leftover] = []
    notes = store.dir / NOTES_DIR
    for note in sorted(notes.glob("*.json")) if notes.is_dir() else []:
        try:
            data = json.loads(note.read_text())
            pid, work = int(data["pid"]), Path(str(data["work"]))
        except (OSError, ValueError, KeyError, TypeError):
            found.append(Leftover(note, None, 0))  # unreadable: half-written by a killed export
            continue
        if pid_alive(pid):
            continue
        match = _WORK.match(work.name)
        named = work.is_absolute() and match is not None and int(match["pid"]) == pid
        if not (named and work.is_dir() and not work.is_symlink()):
            found.append(Leftover(note, None, 0))
            continue
        size = sum(p.stat().st_size for p in work.rglob("*") if p.is_file() and not p.is_symlink())
        found.append(Leftover(note, work, size))
    return found


def remove(leftover: Leftover) -> None:
    """Remove what a dead export left: its working directory, then its note."""
    if leftover.work is not None:
        shutil.rmtree(leftover.work, ignore_errors=True)
    leftover.note.unlink(missing_ok=True)


# --------------------------------------------------------------------------- the exporters


def _quiet(line: str) -> None:
    """Says nothing: the default for lines meant for people."""


@dataclass(frozen=True)
class ExportRequest:
    """What `repro export` was asked: the run, where to write, and each exporter's options."""

    loaded: LoadedRun
    store: Store
    output: str | None = None  # the file to write; None: <id> and the exporter's suffix
    image: str | None = None  # slurm/k8s: the image to run, by digest
    with_image: bool = False  # capsule: carry the environment image
    sign_path: Path | None = None  # capsule: the signing key file
    attest: bool = False  # capsule: carry the run's attestation
    with_data: bool = False  # capsule: carry the declared data
    allow_secrets: bool = False  # capsule: export even when an output holds a credential
    data_remote: str | None = None  # the `store.data_remote` setting
    max_data_size: int | None = None
    attest_format: str = "intoto"  # capsule: its format, intoto (SLSA provenance) or oms (model signature)
    say: Callable[[str], None] = _quiet  # what is being done, for people
    warn: Callable[[str], None] = _quiet  # what people should know of the result


@dataclass(frozen=True)
class Exporter:
    """One way to export a run: ``--as NAME``."""

    name: str
    help: str  # one line for --help
    suffix: str  # of the default file name
    write: Callable[[ExportRequest, Path], Exported]
    capsule: bool = False  # takes the capsule's options (--sign, --with-image, --attest, --with-data)

    def dest(self, request: ExportRequest) -> Path:
        return Path(request.output or f"{request.loaded.record.id}{self.suffix}")


def _write_capsule(request: ExportRequest, dest: Path) -> Exported:
    """The capsule tar (`export_run`), after the checks its options call for."""
    loaded = request.loaded
    key = None
    if request.sign_path is not None:
        from repro.store import signing

        key = signing.load_signing_key(request.sign_path)
    if not request.allow_secrets:
        refuse_secrets_in_outputs(loaded, request.store)
    data = None
    if request.with_data:
        from repro.store import datablobs, limits

        remote = datablobs.remote_root(request.data_remote, request.store.root)
        data = carried_data(loaded, request.store, remote, request.max_data_size or limits.MAX_DATA_BYTES)
        request.say(f"carrying {plural(data.files, 'data file')} ({human_bytes(data.size)}) in the capsule")
    if request.with_image:
        request.say("saving the environment image into the capsule (docker save or podman save)")
    done = export_run(
        loaded, dest, request.store, request.with_image, key, request.attest, data, request.attest_format
    )
    done.key_label = key.label if key is not None else None
    done.data_size = data.size if data is not None else None
    return done


def _written(dest: Path, text: str) -> Exported:
    dest.write_text(text)
    return Exported(dest, dest.stat().st_size)


def _write_slurm(request: ExportRequest, dest: Path) -> Exported:
    from repro.backends.exporters.slurm import slurm_script

    return _written(dest, slurm_script(request.loaded.record, request.image))


def _write_k8s(request: ExportRequest, dest: Path, job: bool = False) -> Exported:
    from repro.backends.exporters.k8s import k8s_yaml

    return _written(
        dest,
        k8s_yaml(request.loaded.record, _k8s_image(request.loaded.record, request.image, request.warn), job),
    )


def _write_k8s_job(request: ExportRequest, dest: Path) -> Exported:
    return _write_k8s(request, dest, job=True)


def _k8s_image(record: Record, image: str | None, warn: Callable[[str], None] = _quiet) -> str:
    """The image a manifest names: ``image`` when given, else the run's own image pinned by id.

    Raises:
        UsageError: no image given and the run has none (it ran on the local or slurm backend).
    """
    if image:
        return image
    built = record.deps.image
    if built is None or not built.id:
        raise UsageError(
            f"run {record.id} ran without an image ({record.backend.name} backend)",
            hint="pass --image REGISTRY/NAME@sha256:… (an image with the project's dependencies and code)",
        )
    warn("the manifest names the local image by id; push it and pass --image with the registry's digest")
    return f"{built.tag or 'repro-env'}@{built.id}"


EXPORTERS = (
    Exporter("capsule", "the .tar", ".tar", _write_capsule, capsule=True),
    Exporter("slurm", "a standalone sbatch script", ".sbatch", _write_slurm),
    Exporter("k8s", "a Kubeflow PyTorchJob (a batch/v1 Job for one process)", ".yaml", _write_k8s),
    Exporter("k8s-job", "a batch/v1 Job on one node", ".yaml", _write_k8s_job),
)


def exporter(name: str) -> Exporter:
    """The exporter called ``name``.

    Raises:
        UsageError: no exporter has that name (naming those that do).
    """
    for entry in EXPORTERS:
        if entry.name == name:
            return entry
    raise UsageError(f"no exporter called {name!r}", hint="one of: " + ", ".join(e.name for e in EXPORTERS))
