"""`repro push`, `repro pull`: runs shared through the OCI registry a team already runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from repro import ui
from repro.cli import options
from repro.cli.completion import complete_ref
from repro.cli.context import AppContext, pass_app
from repro.errors import UsageError
from repro.store.runs import LoadedRun

if TYPE_CHECKING:
    from repro.share.referrers import Attached
from repro.ui import share


@click.command("push")
@click.argument("run", shell_complete=complete_ref)
@click.argument("ref")
@options.with_data
@options.allow_secrets_in_outputs
@options.attest
@options.attest_format
@options.sign
@options.max_data_size
@options.json_option("Print what was pushed as JSON (schemas/push.json).")
@pass_app
def push(app: AppContext, run: str, ref: str, with_data: bool, allow_secrets_in_outputs: bool,
         attest: bool, attest_format: str, sign_path: Path | None, max_data_size: int | None,
         as_json: bool) -> None:  # fmt: skip
    """Push RUN to a registry as an OCI artifact: the record and every blob as content-addressed
    layers, so a sibling run uploads only what the registry does not hold yet.

    \b
    repro push latest ghcr.io/team/runs:baseline
    repro pull ghcr.io/team/runs:baseline            (elsewhere) into that store
    repro replay oci://ghcr.io/team/runs:baseline    or replay it straight from the registry
    repro push latest ghcr.io/team/runs:v2 --attest --format oms --sign ec.key   with a model signature

    RUN: id, id prefix, latest, latest~N, a run dir or a capsule file. A run whose outputs hold a
    credential is refused, as `repro export` refuses it. A run on the docker backend takes its
    environment image along: an ordinary OCI image in the same repository, named by digest in the
    run's manifest, uploaded once for every run of that image (the engine must still hold it).
    --attest attaches the run's attestation (--format intoto) or its OpenSSF model signature
    (--format oms) to the pushed run as an OCI referrer (its `subject`), listed under the tag
    sha256-<digest> too.

    REF: REGISTRY/REPOSITORY:TAG (or @sha256:DIGEST), with or without oci://. The login is the
    host's own (`docker login`, `podman login`: ~/.docker/config.json, $REGISTRY_AUTH_FILE,
    credential helpers); HTTPS always, checked against the host's CAs (SSL_CERT_FILE when set),
    plain HTTP only to a registry on this machine, or one named in repro.yaml's
    registries.insecure, that does not speak TLS.
    """
    from repro import export
    from repro.share.artifact import push_run
    from repro.share.reference import parse
    from repro.store import datablobs, limits

    options.require_attest_for_format(attest, attest_format)
    target = parse(ref)
    loaded = app.store.resolve(run)
    if not allow_secrets_in_outputs:
        export.refuse_secrets_in_outputs(loaded, app.store)
    data = None
    if with_data:
        remote = datablobs.remote_root(app.settings.data_remote, app.store.root)
        limit = max_data_size or limits.MAX_DATA_BYTES
        data = export.carried_data(loaded, app.store, remote, limit).blobs
    statement = _attestation(app, loaded, sign_path, attest_format) if attest else None
    ui.info(f"pushing {loaded.record.id} to {target}")
    done = push_run(loaded, target, data, statement, app.settings.insecure_registries)
    if as_json:
        ui.json_out(share.push_dict(done))
        return
    ui.out(share.push_text(done))


def _attestation(app: AppContext, loaded: LoadedRun, sign_path: Path | None, attest_format: str) -> Attached:
    """The run's attestation as one DSSE line (signed with the key at ``sign_path`` when given), or
    with ``attest_format`` "oms" its OpenSSF model signature; with the artifact type it is attached as.

    Raises:
        UsageError: a run that cannot be attested; a key of the wrong kind; oms without a key.
    """
    from repro.share.referrers import ATTESTATION_TYPE, Attached
    from repro.store import attestation, oms, signing

    key = signing.load_signing_key(sign_path) if sign_path is not None else None
    if attest_format == "oms":
        if key is None:
            raise UsageError("--attest --format oms signs the model files: it needs --sign KEYFILE",
                             hint=f"--sign KEYFILE; {oms.KEY_HINT}")  # fmt: skip
        return Attached("oms", oms.BUNDLE_MEDIA_TYPE, oms.sign_run(loaded, key).bundle)
    made = attestation.attest(
        loaded, attestation.capsule_digest(loaded), attestation.replays_of(app.store, loaded.record.id), key
    )
    return Attached("intoto", ATTESTATION_TYPE, made.line())


@click.command("pull")
@click.argument("ref")
@options.json_option("Print what was pulled as JSON (schemas/pull.json).")
@pass_app
def pull(app: AppContext, ref: str, as_json: bool) -> None:
    """Pull the run REF names into this project's store, every layer checked against its digest and
    the whole checked as a capsule from elsewhere is; then `repro replay RUN` replays it.

    \b
    repro pull ghcr.io/team/runs:baseline
    repro replay oci://ghcr.io/team/runs:baseline    the same, without keeping a copy first

    REF: REGISTRY/REPOSITORY:TAG (or @sha256:DIGEST), with or without oci://. The login is the
    host's own (`docker login`, `podman login`: ~/.docker/config.json, $REGISTRY_AUTH_FILE,
    credential helpers); HTTPS always, checked against the host's CAs (SSL_CERT_FILE when set),
    plain HTTP only to a registry on this machine, or one named in repro.yaml's
    registries.insecure, that does not speak TLS.
    """
    from repro.share import open_pulled
    from repro.share.reference import parse

    target = parse(ref)
    opened, digest = open_pulled(app.store, ref)
    carried_image = opened.image_archive is not None
    loaded = app.store.import_run(opened)
    if as_json:
        ui.json_out(share.pull_dict(loaded.record.id, target, digest, carried_image))
        return
    ui.out(f"pulled {loaded.record.id} from {ref.removeprefix('oci://')} ({digest}) into the store")
    ui.info(f"`repro replay {loaded.record.id}` replays it; `repro show {loaded.record.id}` shows it")
