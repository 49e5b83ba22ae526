"""`repro attest`, `verify-attestation`: provenance of a run's outputs that others can check."""

from __future__ import annotations

from pathlib import Path

import click

from repro import ui
from repro.cli import options
from repro.cli.completion import complete_ref
from repro.cli.context import AppContext, pass_app
from repro.cli.events import say_if_replay
from repro.errors import UsageError
from repro.store import atomic, attestation, oms, signing
from repro.store.runs import LoadedRun
from repro.store.verify import is_capsule_file
from repro.units import plural


@click.command("attest")
@click.argument("ref", default="latest", shell_complete=complete_ref)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File to write (default: <id>.intoto.jsonl; --format oms: <id>.oms.sig).")  # fmt: skip
@click.option("--sign", "sign_path", type=click.Path(path_type=Path), default=None, metavar="KEYFILE",
              help="Sign it with this private key (from `repro keygen --type ed25519`, or --type "
              "ecdsa-p256, the one --format oms takes).")  # fmt: skip
@options.attest_format
@pass_app
def attest(
    app: AppContext, ref: str, output: Path | None, sign_path: Path | None, attest_format: str
) -> None:
    """Write an in-toto attestation of a run: which files it produced (name and SHA-256), from
    which code, data, lock and image, with which command, seed and mode (SLSA provenance v1), in
    a DSSE envelope signed with an Ed25519 (or ECDSA P-256) key. With --format oms, an OpenSSF
    Model Signing v1 signature of the run's model files instead, which the reference verifier
    (`model_signing verify key`) checks with the public key.

    \b
    repro keygen --type ed25519 me.key
    repro attest latest -o model.intoto.jsonl --sign me.key
    repro verify-attestation model.intoto.jsonl --key me.key.pub --artifact model.pt

    \b
    repro keygen --type ecdsa-p256 ec.key
    repro attest latest --format oms --sign ec.key -o model.sig
    repro get latest -o model/            the model files, as the run wrote them
    model_signing verify key --signature model.sig --public_key ec.key.pub model/
    repro verify-attestation model.sig --key ec.key.pub --artifact model/model.pt

    REF: id, id prefix, latest, latest~N, a run dir or a capsule file. The run must have
    succeeded; each stored output is a subject (outputs over the size limit are hashed with
    xxh3-128, not stored, so they are left out, with a warning). Replays recorded for the run
    are named with their verdicts.
    """
    key = signing.load_signing_key(sign_path) if sign_path is not None else None
    loaded = app.store.resolve(ref)
    record = loaded.record
    say_if_replay(record, "attest")
    if attest_format == "oms":
        _attest_oms(loaded, key, output)
        return
    made = attestation.attest(
        loaded,
        attestation.capsule_digest(loaded),
        attestation.replays_of(app.store, record.id),
        key,
    )
    dest = output or Path(f"{record.id}.intoto.jsonl")
    atomic.write_bytes(dest, made.line())
    for path in made.left_out:
        ui.warn(f"{path} is not attested: it was over the output size limit, hashed but not stored")
    signed = f"signed with {key.label}" if key is not None else "not signed (pass --sign KEYFILE)"
    ui.out(f"attested {record.id} → {dest}: {plural(len(made.subjects), 'file')}, {signed}")


def _attest_oms(loaded: LoadedRun, key: signing.SigningKey | None, output: Path | None) -> None:
    """`repro attest --format oms`: the OMS bundle of the run's model files, written and named.

    Raises:
        UsageError: no key, or not an ECDSA P-256 private key; a run that cannot be attested.
    """
    if key is None:
        raise UsageError("an OMS model signature is signed: --format oms needs --sign KEYFILE",
                         hint=f"--sign KEYFILE; {oms.KEY_HINT}")  # fmt: skip
    made = oms.sign_run(loaded, key)
    dest = output or Path(f"{loaded.record.id}.oms.sig")
    atomic.write_bytes(dest, made.bundle)
    for path in made.left_out:
        ui.warn(f"{path} is not signed: it was over the output size limit, hashed but not stored")
    ui.out(
        f"signed the model files of {loaded.record.id} → {dest} (OpenSSF Model Signing v1): "
        f"{plural(len(made.subjects), 'file')}, {key.label}"
    )
    ui.info(f"check: `repro get {loaded.record.id} -o DIR`, then "
            f"`model_signing verify key --signature {dest} --public_key {key.path}.pub DIR`")  # fmt: skip


@click.command("verify-attestation")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--key", "key_path", type=click.Path(path_type=Path), required=True, metavar="PUBFILE",
              help="The public key (PATH.pub from `repro keygen --type ed25519`, or ecdsa-p256 for an "
              "OpenSSF model signature).")  # fmt: skip
@click.option("--artifact", "artifacts", type=click.Path(path_type=Path), multiple=True, metavar="PATH",
              help="Check that this file is one the run produced (its SHA-256 is a subject); "
              "repeatable.")  # fmt: skip
def verify_attestation(file: Path, key_path: Path, artifacts: tuple[Path, ...]) -> None:
    """Check an attestation's signature with a public key, and that each --artifact is attested.

    \b
    repro verify-attestation model.intoto.jsonl --key me.key.pub --artifact model.pt
    repro verify-attestation run.tar --key me.key.pub    the one a capsule carries (export --attest)

    FILE is an attestation (`repro attest`), an OpenSSF model signature (`repro attest --format
    oms`: checked with its ECDSA P-256 public key), or a capsule carrying either: then every
    member is checked first, and an attestation must name this capsule's SHA256SUMS.

    Exit 6 when the signature fails, the key is another one, the file is malformed, or an
    artifact's SHA-256 is not a subject (the file changed after the run), or the file holds more
    than one statement; exit 2 for a missing file, a key that is not an Ed25519 or ECDSA P-256
    key, or a private key (pass its .pub: a verifier needs only the public half).
    """
    key = signing.load_verifying_key(key_path)
    what = "attestation"
    if is_capsule_file(file):
        checked, what = oms.check_capsule(file, key)
    else:
        raw = attestation.read_file(file)
        if oms.is_bundle(raw):
            checked, what = oms.check(raw, file.name, key), oms.WHAT
        else:
            checked = attestation.check(raw, file.name, key)
    found = [(path, attestation.artifact_subject(checked, path)) for path in artifacts]  # all, before "ok"
    run = f"run {checked.run_id}" if checked.run_id else "a run"
    ui.out(f"ok: {what} of {run}, signed with {key.label}; {plural(len(checked.subjects), 'file')} attested")
    for path, subject in found:
        ui.out(f"{path}: attested, {subject.name} (sha256 {subject.sha256[:16]}…)")
