"""`repro push`, `repro pull`: runs shared through the OCI registry a team already runs."""

from __future__ import annotations

from pathlib import Path

import click

from repro import ui
from repro.cli import options
from repro.cli.completion import complete_ref
from repro.cli.context import AppContext, pass_app
from repro.store.runs import LoadedRun
from repro.units import human_bytes, plural


@click.command("push")
@click.argument("run", shell_complete=complete_ref)
@click.argument("ref")
@click.option("--with-data", is_flag=True,
              help="Carry the run's declared data too, as content-addressed blobs.")  # fmt: skip
@click.option("--allow-secrets-in-outputs", is_flag=True,
              help="Push even when the run's outputs hold a credential (refused by default, naming the "
              "files).")  # fmt: skip
@click.option("--attest", is_flag=True,
              help="Attach the run's in-toto attestation (as `repro attest` writes it) to the pushed run "
              "as an OCI referrer (its `subject`), listed under the tag sha256-<digest>.")  # fmt: skip
@click.option("--sign", "sign_path", type=click.Path(path_type=Path), default=None, metavar="KEYFILE",
              help="With --attest: sign the attestation with this Ed25519 private key "
              "(`repro keygen --type ed25519`).")  # fmt: skip
@options.max_data_size
@pass_app
def push(app: AppContext, run: str, ref: str, with_data: bool, allow_secrets_in_outputs: bool, attest: bool,
         sign_path: Path | None, max_data_size: int | None) -> None:  # fmt: skip
    """Push RUN to a registry as an OCI artifact: the record and every blob as content-addressed
    layers, so a sibling run uploads only what the registry does not hold yet.

    \b
    repro push latest ghcr.io/team/runs:baseline
    repro pull ghcr.io/team/runs:baseline            (elsewhere) into that store
    repro replay oci://ghcr.io/team/runs:baseline    or replay it straight from the registry

    RUN: id, id prefix, latest, latest~N, a run dir or a capsule file. A run whose outputs hold a
    credential is refused, as `repro export` refuses it. A run on the docker backend takes its
    environment image along: an ordinary OCI image in the same repository, named by digest in the
    run's manifest, uploaded once for every run of that image (the engine must still hold it).

    REF: REGISTRY/REPOSITORY:TAG (or @sha256:DIGEST), with or without oci://. The login is the
    host's own (`docker login`, `podman login`: ~/.docker/config.json, $REGISTRY_AUTH_FILE,
    credential helpers); HTTPS always, checked against the host's CAs (SSL_CERT_FILE when set),
    plain HTTP only to a registry on this machine that does not speak TLS.
    """
    from repro import export
    from repro.share.artifact import push_run
    from repro.share.reference import parse
    from repro.store import datablobs, limits

    target = parse(ref)
    loaded = app.store.resolve(run)
    if not allow_secrets_in_outputs:
        export.refuse_secrets_in_outputs(loaded, app.store)
    data = None
    if with_data:
        remote = datablobs.remote_root(app.settings.data_remote, app.store.root)
        limit = max_data_size or limits.MAX_DATA_BYTES
        data = export.carried_data(loaded, app.store, remote, limit).blobs
    statement = _attestation(app, loaded, sign_path) if attest else None
    ui.info(f"pushing {loaded.record.id} to {target}")
    done = push_run(loaded, target, data, statement)
    ui.out(
        f"pushed {done.run} → {done.ref}: {plural(done.layers, 'layer')} ({human_bytes(done.size)}); "
        f"uploaded {plural(done.uploaded, 'blob')} ({human_bytes(done.uploaded_bytes)}), "
        f"{done.reused} already there" + (f"; image {done.image}" if done.image else "")
    )
    if done.attestation:
        ui.out(f"attestation attached as a referrer: {done.attestation}")


def _attestation(app: AppContext, loaded: LoadedRun, sign_path: Path | None) -> bytes:
    """The run's attestation as one DSSE line, signed with the key at ``sign_path`` when given.

    Raises:
        UsageError: a run that cannot be attested, or a key that is not an Ed25519 private key.
    """
    from repro.store import attestation, signing

    key = signing.load_signing_key(sign_path) if sign_path is not None else None
    made = attestation.attest(
        loaded, attestation.capsule_digest(loaded), attestation.replays_of(app.store, loaded.record.id), key
    )
    return made.line()


@click.command("pull")
@click.argument("ref")
@pass_app
def pull(app: AppContext, ref: str) -> None:
    """Pull the run REF names into this project's store, every layer checked against its digest and
    the whole checked as a capsule from elsewhere is; then `repro replay RUN` replays it.

    \b
    repro pull ghcr.io/team/runs:baseline
    repro replay oci://ghcr.io/team/runs:baseline    the same, without keeping a copy first

    REF: REGISTRY/REPOSITORY:TAG (or @sha256:DIGEST), with or without oci://. The login is the
    host's own (`docker login`, `podman login`: ~/.docker/config.json, $REGISTRY_AUTH_FILE,
    credential helpers); HTTPS always, checked against the host's CAs (SSL_CERT_FILE when set),
    plain HTTP only to a registry on this machine that does not speak TLS.
    """
    from repro.share import open_remote

    loaded = app.store.import_run(open_remote(app.store, ref))
    ui.out(f"pulled {loaded.record.id} from {ref.removeprefix('oci://')} into the store")
    ui.info(f"`repro replay {loaded.record.id}` replays it; `repro show {loaded.record.id}` shows it")


COMMANDS = [push, pull]
