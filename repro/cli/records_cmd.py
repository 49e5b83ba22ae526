"""`repro ls`, `show`, `export`, `get`, `verify`, `keygen`: looking at and sharing records."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from repro import ui
from repro.cli import options
from repro.cli.completion import complete_ref
from repro.cli.context import AppContext, pass_app
from repro.errors import CapsuleInvalid, UsageError
from repro.export import EXPORTERS, Exported, ExportRequest, data_roots, exporter

if TYPE_CHECKING:  # what only one command needs is imported in it (`repro ls` pays for none of it)
    from repro.rerun.inputs import InputSource
    from repro.store.record import Record
    from repro.store.runs import LoadedRun
    from repro.store.signing import Seal, Trust


@click.command("ls")
@options.json_option("Print the runs as JSON (schemas/ls.json).")
@click.option("-n", "--last", type=click.IntRange(1), default=None, help="Only the newest N runs.")
@click.option("-r", "--reverse", is_flag=True, help="Oldest first.")
@pass_app
def ls(app: AppContext, as_json: bool, last: int | None, reverse: bool) -> None:
    """List the runs of this project, newest first (incomplete ones included).

    Commands are quoted as a shell reads them, so one can be pasted back. On a terminal the
    command column is cut to its width (COLUMNS wins); piped or redirected, lines are whole.
    """
    from repro.ui import records as render

    if app.store.detached_runs():  # Slurm jobs submitted with --detach: seal those that ended
        from repro.cli.events import on_event
        from repro.run.execute import settle_detached

        settle_detached(app.store, on_event)
    rows = app.store.rows()[::-1]  # the store lists oldest first
    if last is not None:
        rows = rows[:last]
    if reverse:
        rows.reverse()
    if as_json:
        ui.json_out(render.ls_dict(rows))
    elif not rows:
        ui.info("no runs yet: `repro run train.py` makes one")
    else:
        ui.out(render.ls_table(rows, ui.out_width()))


@click.command("show")
@click.argument("ref", default="latest", shell_complete=complete_ref)
@options.json_option("The whole record as JSON.")
@pass_app
def show(app: AppContext, ref: str, as_json: bool) -> None:
    """Show a run's record, its lock listed in full (wheels and source builds); for a capsule that
    carries an attestation or an OpenSSF model signature (`export --attest [--format oms]`), what it
    names (checked by `verify-attestation`).

    REF: id, id prefix, latest, latest~N, a run dir or a capsule file."""
    from repro.facts.lockplan import run_packages
    from repro.store import attestation, oms
    from repro.ui import records as render

    # The text names the first outputs and counts the code files: a code list kept as a blob is not read.
    loaded = app.store.resolve(ref) if as_json else app.store.resolve(ref, lists=("results.outputs",))
    if as_json:
        ui.json_out(loaded.record.to_dict())
        return
    carried = attestation.summary(loaded.attestation) if loaded.attestation is not None else None
    signature = oms.summary(loaded.model_signature) if loaded.model_signature is not None else None
    packages = run_packages(loaded.record.deps, loaded.read_blob)
    ui.out(render.show_text(loaded.record, packages, carried, _data_sources(app, loaded), signature))


def _data_sources(app: AppContext, loaded: LoadedRun) -> list[InputSource]:
    """Where a replay here would find each declared input of the run."""
    from repro.rerun.inputs import locate_inputs
    from repro.store import datablobs
    from repro.store.statcache import HashCache

    remote = datablobs.remote_root(app.settings.data_remote, app.store.root)
    roots = data_roots(loaded, app.store, remote)
    if not app.store.cache_dir.is_dir():  # looking creates no store
        return locate_inputs(loaded.record, app.store.root, roots, loaded.read_blob)
    with HashCache(app.store.cache_dir / "hashes.sqlite") as cache:
        return locate_inputs(loaded.record, app.store.root, roots, loaded.read_blob, cache)


def _default_names() -> str:
    """``<id>.tar, <id>.sbatch or <id>.yaml``: the default file names of the exporters."""
    names = [f"<id>{s}" for s in dict.fromkeys(e.suffix for e in EXPORTERS)]
    return ", ".join(names[:-1]) + " or " + names[-1]


@click.command("export")
@click.argument("ref", default="latest", shell_complete=complete_ref)
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help=f"File to write (default: {_default_names()}).")  # fmt: skip
@click.option(
    "--as", "as_", type=click.Choice([e.name for e in EXPORTERS]), default=EXPORTERS[0].name,
    help="; ".join(f"{e.name}: {e.help}" for e in EXPORTERS) + ".",
)  # fmt: skip
@click.option(
    "--image", default=None, metavar="REF",
    help="slurm/k8s: the image to run, by digest (REGISTRY/NAME@sha256:…) once pushed; "
    "default for k8s: the run's image.",
)  # fmt: skip
@click.option("--with-image", is_flag=True,
              help="capsule: carry the environment image inside (docker save): the capsule replays with "
              "no network, wheelhouse or base image.")  # fmt: skip
@options.sign
@options.attest
@options.attest_format
@options.with_data
@options.allow_secrets_in_outputs
@options.max_data_size
@options.json_option("Print what was written as JSON (schemas/export.json).")
@pass_app
def export(
    app: AppContext,
    ref: str,
    output: str | None,
    as_: str,
    image: str | None,
    with_image: bool,
    sign_path: Path | None,
    attest: bool,
    attest_format: str,
    with_data: bool,
    allow_secrets_in_outputs: bool,
    max_data_size: int | None,
    as_json: bool,
) -> None:
    """Write a run as a capsule .tar (deterministic bytes), or as a job for a cluster.

    \b
    repro export latest -o run.tar
    repro export latest -o run.tar --with-image            the environment image travels inside
    repro export latest -o run.tar --with-data             the declared data travels inside
    repro export latest -o run.tar --sign team.key         signed: `repro verify run.tar --key team.key`
    repro export latest -o run.tar --sign ed.key           Ed25519: `repro verify run.tar --key ed.key.pub`
    repro export latest -o run.tar --sign ed.key --attest  with its attestation (`repro verify-attestation`)
    repro export latest -o run.tar --sign ec.key --attest --format oms   with an OpenSSF model signature
    repro export latest --as slurm -o job.sbatch          sbatch job.sbatch   (from the project's checkout)
    repro export latest --as k8s --image reg/x@sha256:… -o job.yaml   kubectl apply -f job.yaml
    """
    from repro.cli.events import say_if_replay

    _seal_killed(app, ref)
    loaded = app.store.resolve(ref)
    say_if_replay(loaded.record, "export")
    entry = exporter(as_)
    options.require_attest_for_format(attest, attest_format)
    if not entry.capsule:
        _refuse_capsule_options(as_, sign_path, with_image, attest, with_data)
    remote = app.settings.data_remote if with_data else None  # repro.yaml is read only when data travels
    request = ExportRequest(
        loaded, app.store, output, image, with_image, sign_path, attest, with_data, allow_secrets_in_outputs,
        remote, max_data_size, say=ui.info, warn=ui.warn, attest_format=attest_format,
    )  # fmt: skip
    dest = entry.dest(request)
    done = entry.write(request, dest)
    if entry.capsule:
        _say_exported(loaded.record, as_, dest, done, as_json)
    elif as_json:
        from repro.ui import records as render

        ui.json_out(render.export_dict(loaded.record.id, as_, dest, done.size, None, None))
    else:
        ui.out(f"exported {loaded.record.id} → {dest} ({as_})")


def _seal_killed(app: AppContext, ref: str) -> None:
    """A run killed with its repro process is sealed as interrupted before it is exported (its
    checkpoints among its outputs), so that it can be resumed elsewhere (`repro resume CAPSULE`)."""
    from repro.killed import dead

    found = dead(app.store, ref)
    if found is None:
        return
    from repro.resume import salvage

    sealed = salvage(app.store, found, app.settings)
    ui.info(f"run {sealed.id} was never sealed (its repro process died): sealed as interrupted")


def _refuse_capsule_options(
    as_: str, sign_path: Path | None, with_image: bool, attest: bool, with_data: bool
) -> None:
    """An option of capsules given with another exporter is a usage error (a key from the environment is not).

    Raises:
        UsageError: naming the option.
    """
    source = click.get_current_context().get_parameter_source("sign_path")
    if sign_path is not None and source is click.core.ParameterSource.COMMANDLINE:
        raise UsageError(
            f"--sign applies to capsules, not --as {as_}", hint="repro export REF --sign KEYFILE"
        )
    if with_image or attest or with_data:
        flag = "--with-image" if with_image else "--attest" if attest else "--with-data"
        raise UsageError(f"{flag} applies to capsules, not --as {as_}", hint=f"repro export REF {flag}")


def _say_exported(record: Record, as_: str, dest: Path, done: Exported, as_json: bool) -> None:
    """What `repro export` wrote as a capsule: a line for people, or its JSON answer."""
    if as_json:
        from repro.ui import records as render

        ui.json_out(
            render.export_dict(
                record.id, as_, done.path, done.size, done.image_size, done.key_id, done.data_size
            )
        )
        return
    size = f", image {ui.human_bytes(done.image_size)}" if done.image_size is not None else ""
    size += f", data {ui.human_bytes(done.data_size)}" if done.data_size is not None else ""
    signed = f", signed with {done.key_label}" if done.key_label is not None else ""
    attested = {"intoto": ", with its attestation", "oms": ", with its OpenSSF model signature"}.get(
        done.attested or "", ""
    )
    attested += ", its lock as pylock.toml" if record.deps.pylock_blob else ""
    ui.out(f"exported {record.id} → {dest} ({ui.human_bytes(done.size)}{size}){signed}{attested}")


@click.command("get")
@click.argument("ref", shell_complete=complete_ref)
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option("-o", "--output", "dest", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Directory to write the files into (made if missing).")  # fmt: skip
@click.option("--force", is_flag=True, help="Replace files already in the directory.")
@options.json_option("Print what was written as JSON (schemas/get.json).")
@pass_app
def get(app: AppContext, ref: str, paths: tuple[str, ...], dest: Path, force: bool, as_json: bool) -> None:
    """Write a run's outputs (or the PATHs named: files or directories) into a directory, each
    checked against its recorded hash. Outputs the store did not keep are named; a link the run made
    is reported, never recreated; a file already there is replaced only with --force.

    \b
    repro get latest -o out/                      every kept output
    repro get latest model.pt -o out/             one file
    repro get run.tar checkpoints -o out/ --force  a folder of a capsule's outputs, replacing

    REF: id, id prefix, latest, latest~N, a run dir or a capsule file."""
    from repro.cli.events import say_if_replay
    from repro.get import get_files
    from repro.ui import records as render

    loaded = app.store.resolve(ref, lists=("results.outputs",))
    say_if_replay(loaded.record, "get")
    done = get_files(loaded, list(paths), dest, force)
    if as_json:
        ui.json_out(render.get_dict(done))
        return
    ui.out(render.get_text(done))


@click.command("verify")
@click.argument("ref", shell_complete=complete_ref)
@options.trust_options
@options.json_option("Print the result as JSON (schemas/verify.json).")
@pass_app
def verify(app: AppContext, ref: str, as_json: bool, trust: Trust | None) -> None:
    """Check a capsule's integrity: every member against its checksum, every blob against its
    content-address name, every path in the record inside its root. Exit 6 when it fails.

    \b
    REF is a capsule .tar, or a run in the store (its blobs are re-hashed). Without a key a
    passing capsule is only consistent: anyone can recompute SHA256SUMS. It shows "signed with
    key <id>" or "not signed"; with --key the signature is checked: a holder of that key
    sealed it and no member changed since (exit 6 otherwise). A missing file is exit 2.
    """
    from repro.ui import records as render

    try:
        _verify(app, ref, as_json, trust)
    except CapsuleInvalid as e:
        if as_json:  # the answer says why too; the error line and exit 6 follow
            ui.json_out(render.verify_failed_dict(e.message, e.member))
        raise


def _verify(app: AppContext, ref: str, as_json: bool, trust: Trust | None) -> None:
    from repro.store import signing
    from repro.store.runs import is_capsule_ref
    from repro.store.verify import verify_tar
    from repro.ui import records as render

    path = Path(ref)
    image_size: int | None = None
    seal: Seal | None = None
    if is_capsule_ref(ref):
        verified = verify_tar(path)
        record, count, image_size = verified.record, len(verified.members), verified.image_size
        seal = signing.check_seal(path.name, verified.sums, verified.signature, trust or signing.Trust())
    else:
        if trust is not None:
            raise UsageError(
                "--key and --require-signed check an exported capsule .tar, not a run in the store"
            )
        loaded = app.store.resolve(ref)
        record = loaded.record
        count = _verify_store_run(loaded, record.blobs())
    if as_json:
        ui.json_out(render.verify_dict(record, count, image_size, seal))
    else:
        image = f", image {ui.human_bytes(image_size)} included" if image_size is not None else ""
        ui.out(f"ok: {record.id} ({record.format}), {count} members verified{image}")
        if seal is not None:
            ui.out(render.seal_text(seal))


def _verify_store_run(loaded: LoadedRun, digests: set[str]) -> int:
    for digest in sorted(digests):
        path = loaded.blob_path(digest)  # re-hashed against its name
        if not path.is_file():
            raise CapsuleInvalid(f"blob {digest} is missing from the store", member=str(path))
    return len(digests) + 1


@click.command("keygen")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--type", "algorithm", type=click.Choice(["hmac", "ed25519", "ecdsa-p256"]), default="hmac",
              show_default=True,
              help="hmac: a shared secret that signs and checks; ed25519: a private key that signs and "
              "a public key (PATH.pub) that only checks; ecdsa-p256: the same split, the key type "
              "OpenSSF Model Signing verifiers check (`repro attest --format oms`).")  # fmt: skip
def keygen(path: Path, algorithm: str) -> None:
    """Write a new signing key at PATH, mode 0600; never overwrites a file.

    \b
    repro keygen team.key                                 32 random bytes; prints the key id
    repro export RUN --sign team.key -o run.tar          (or REPRO_SIGNING_KEY=team.key)
    repro verify run.tar --key team.key --require-signed
    A shared secret: whoever holds the file can sign capsules as well as check them.

    \b
    repro keygen --type ed25519 ed.key                    ed.key (private, PEM) and ed.key.pub
    repro export RUN --sign ed.key -o run.tar
    repro verify run.tar --key ed.key.pub --require-signed   the public key checks, never signs

    \b
    repro keygen --type ecdsa-p256 model.key              model.key and model.key.pub (PEM, P-256)
    repro attest RUN --format oms --sign model.key -o model.sig
    model_signing verify key --signature model.sig --public_key model.key.pub MODEL_DIR
    """
    from repro.store import signing

    if algorithm == "hmac":
        key = signing.new_key(path)
        ui.out(f"key {key.id} written to {path} (mode 0600); keep it secret: it signs as well as verifies")
        return
    key = signing.new_key(path, signing.ED25519 if algorithm == "ed25519" else signing.ECDSA_P256)
    public = signing.public_key_path(path)
    ui.out(
        f"{key.label}: private key {path} (mode 0600, signs; keep it secret), "
        f"public key {public} (checks only; give it to whoever verifies)"
    )
