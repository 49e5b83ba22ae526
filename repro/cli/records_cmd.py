"""`repro ls`, `show`, `export`, `verify`: looking at and sharing records."""

from __future__ import annotations

from pathlib import Path

import click

from repro import ui
from repro.capsule import pack, verify_tar
from repro.cli.context import AppContext, pass_app
from repro.errors import CapsuleInvalid
from repro.ui import records as render


@click.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print the runs as a JSON list.")
@click.option("-n", "--last", type=click.IntRange(1), default=None, help="Only the last N runs.")
@pass_app
def ls(app: AppContext, as_json: bool, last: int | None) -> None:
    """List the runs of this project, oldest first (incomplete ones included)."""
    rows = app.store.rows()
    if last is not None:
        rows = rows[-last:]
    if as_json:
        ui.json_out(render.ls_dicts(rows))
    elif not rows:
        ui.info("no runs yet: `repro run train.py` makes one")
    else:
        ui.out(render.ls_table(rows))


@click.command("show")
@click.argument("ref", default="latest")
@click.option("--json", "as_json", is_flag=True, help="The whole record as JSON.")
@pass_app
def show(app: AppContext, ref: str, as_json: bool) -> None:
    """Show a run's record. REF: id, id prefix, latest, latest~N, a run dir or a capsule file."""
    loaded = app.store.resolve(ref)
    if as_json:
        ui.json_out(loaded.record.to_dict())
    else:
        ui.out(render.show_text(loaded.record))


@click.command("export")
@click.argument("ref", default="latest")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Capsule file to write (default: <id>.tar).")  # fmt: skip
@pass_app
def export(app: AppContext, ref: str, output: str | None) -> None:
    """Write a run as one self-contained capsule .tar (deterministic bytes)."""
    loaded = app.store.resolve(ref)
    dest = Path(output or f"{loaded.record.id}.tar")
    pack(loaded.record, loaded.blob_path, dest)
    size = dest.stat().st_size
    ui.out(f"exported {loaded.record.id} → {dest} ({ui.human_bytes(size)})")


@click.command("verify")
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_app
def verify(app: AppContext, ref: str, as_json: bool) -> None:
    """Check a capsule's integrity: every member against its checksum, every blob against its
    content-address name, every path in the record inside its root. Exit 6 when it fails.

    REF is a capsule .tar, or a run in the store (its blobs are re-hashed). A capsule that
    passes is consistent; that says nothing of who made it: replay only capsules you trust.
    """
    path = Path(ref)
    if path.is_file():
        verified = verify_tar(path)
        record, count = verified.record, len(verified.members)
    else:
        loaded = app.store.resolve(ref)
        record = loaded.record
        count = _verify_store_run(loaded.blob_path, record.blobs())
    if as_json:
        ui.json_out({"ok": True, "id": record.id, "members": count, "format": record.format})
    else:
        ui.out(f"ok: {record.id} ({record.format}), {count} members verified")


def _verify_store_run(blob_path: object, digests: set[str]) -> int:
    from repro.hashing import hash_file

    assert callable(blob_path)
    for digest in sorted(digests):
        path = blob_path(digest)
        if not path.is_file():
            raise CapsuleInvalid(f"blob {digest} is missing from the store", member=str(path))
        if hash_file(path) != digest:
            raise CapsuleInvalid(f"blob {digest} does not match its content (corrupt)", member=str(path))
    return len(digests) + 1


COMMANDS = [ls, show, export, verify]
