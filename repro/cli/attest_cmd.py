"""`repro attest`, `verify-attestation`: provenance of a run's outputs that others can check."""

from __future__ import annotations

from pathlib import Path

import click

from repro import ui
from repro.cli.completion import complete_ref
from repro.cli.context import AppContext, pass_app
from repro.cli.events import say_if_replay
from repro.store import atomic, attestation, signing
from repro.store.verify import is_capsule_file
from repro.units import plural


@click.command("attest")
@click.argument("ref", default="latest", shell_complete=complete_ref)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File to write (default: <id>.intoto.jsonl).")  # fmt: skip
@click.option("--sign", "sign_path", type=click.Path(path_type=Path), default=None, metavar="KEYFILE",
              help="Sign it with this Ed25519 private key (from `repro keygen --type ed25519`).")  # fmt: skip
@pass_app
def attest(app: AppContext, ref: str, output: Path | None, sign_path: Path | None) -> None:
    """Write an in-toto attestation of a run: which files it produced (name and SHA-256), from
    which code, data, lock and image, with which command, seed and mode (SLSA provenance v1), in
    a DSSE envelope signed with an Ed25519 key.

    \b
    repro keygen --type ed25519 me.key
    repro attest latest -o model.intoto.jsonl --sign me.key
    repro verify-attestation model.intoto.jsonl --key me.key.pub --artifact model.pt

    REF: id, id prefix, latest, latest~N, a run dir or a capsule file. The run must have
    succeeded; each stored output is a subject (outputs over the size limit are hashed with
    xxh3-128, not stored, so they are left out, with a warning). Replays recorded for the run
    are named with their verdicts.
    """
    key = signing.load_signing_key(sign_path) if sign_path is not None else None
    loaded = app.store.resolve(ref)
    record = loaded.record
    say_if_replay(record, "attest")
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
    signed = f"signed with ed25519 key {made.key_id}" if made.key_id else "not signed (pass --sign KEYFILE)"
    ui.out(f"attested {record.id} → {dest}: {plural(len(made.subjects), 'file')}, {signed}")


@click.command("verify-attestation")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--key", "key_path", type=click.Path(path_type=Path), required=True, metavar="PUBFILE",
              help="The Ed25519 public key (PATH.pub from `repro keygen --type ed25519`).")  # fmt: skip
@click.option("--artifact", "artifacts", type=click.Path(path_type=Path), multiple=True, metavar="PATH",
              help="Check that this file is one the run produced (its SHA-256 is a subject); "
              "repeatable.")  # fmt: skip
def verify_attestation(file: Path, key_path: Path, artifacts: tuple[Path, ...]) -> None:
    """Check an attestation's signature with a public key, and that each --artifact is attested.

    \b
    repro verify-attestation model.intoto.jsonl --key me.key.pub --artifact model.pt
    repro verify-attestation run.tar --key me.key.pub    the one a capsule carries (export --attest)

    FILE is an attestation (`repro attest`), or a capsule carrying one: then every member is
    checked first, and the attestation must name this capsule's SHA256SUMS.

    Exit 6 when the signature fails, the key is another one, the file is malformed, or an
    artifact's SHA-256 is not a subject (the file changed after the run), or the file holds more
    than one statement; exit 2 for a missing file, a key that is not an Ed25519 key, or a private
    key (pass its .pub: a verifier needs only the public half).
    """
    key = signing.load_verifying_key(key_path)
    if is_capsule_file(file):
        checked = attestation.check_capsule(file, key)
    else:
        checked = attestation.check(attestation.read_file(file), file.name, key)
    found = [(path, attestation.artifact_subject(checked, path)) for path in artifacts]  # all, before "ok"
    run = f"run {checked.run_id}" if checked.run_id else "a run"
    ui.out(
        f"ok: attestation of {run}, signed with ed25519 key {checked.key_id}; "
        f"{plural(len(checked.subjects), 'file')} attested"
    )
    for path, subject in found:
        ui.out(f"{path}: attested, {subject.name} (sha256 {subject.sha256[:16]}…)")


COMMANDS = [attest, verify_attestation]
