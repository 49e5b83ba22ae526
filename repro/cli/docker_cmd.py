"""`repro build`, `repro base-image`, `repro gc`: the Docker side of the command line."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from repro import export, schemas, ui
from repro.backends import leftover
from repro.backends.base import Event
from repro.cli import options
from repro.cli.events import build_events
from repro.errors import NotFoundError, ReproError
from repro.store import budget
from repro.store import images as store_images
from repro.units import plural


@click.command("build")
@click.option(
    "--lockfile",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Hash-pinned lockfile to build from (default: the project's, compiled if needed).",
)
@click.option(
    "--base-image", default=None, help="Base image tag or id (default: image.base, repro-base:bookworm)."
)
@options.gpus_option(
    "Build the CUDA image, the one `repro run --gpus` runs in (the same values: all, N or device ids; "
    "the image is the same for any of them). Default: the CPU image."
)
@options.cuda_index
@options.json_option("Print the image record as JSON (schemas/build.json).")
@click.pass_obj
def build(
    app: Any,
    lockfile: Path | None,
    base_image: str | None,
    gpus: str | None,
    cuda_index: str | None,
    as_json: bool,
) -> None:
    """Build (or reuse) the environment image for the current lockfile, without running.

    The image tag is the hash of the rendered Dockerfile, the lockfile and the base
    image id: unchanged inputs reuse the image without building. A build shows one line
    per stage (the wheelhouse, each layer) with its sizes and time; the builder's full
    output goes to .repro/logs/ (-v shows it as it comes; a failed build shows its stage's).
    """
    from repro.backends.docker.build import ensure_image
    from repro.backends.docker.engine import engine
    from repro.backends.images import template_for
    from repro.config import Flags

    index = app.plan(Flags(cuda_index=cuda_index)).settings.cuda_index
    with build_events(app.store.dir, "build") as sink:
        if lockfile is None:
            from repro.facts.lockplan import describe_project_lock, ensure_lock, is_stale
            from repro.facts.projectlock import find
            from repro.fetch.reach import check_reachable

            variant, root, configured = "cuda" if gpus else "cpu", app.store.root, app.settings.requirements
            groups = app.settings.groups
            if find(root, configured) is None and is_stale(root, configured, variant, index)[0]:
                sink(Event("stage", f"lock: compiling the {variant} lock"))
            found = ensure_lock(
                root, configured, lambda line: sink(Event("build", line)), variant, index, groups,
                reachable=check_reachable,
            )  # fmt: skip
            sink(Event("stage-end"))
            if found.project_lock:
                sink(Event("info", f"lock: {describe_project_lock(found)}"))
            if found.path is None:
                raise NotFoundError(
                    f"no declared dependencies in {app.store.root} to build an image from",
                    hint="add a requirements.in (or requirements.txt), or pass --lockfile",
                )
            lockfile = found.path
        base = base_image or app.settings.base_image
        with engine() as client:
            built = ensure_image(client, lockfile, base, template_for(gpus), sink, index)
    if not built.reused:  # `repro gc --images` may remove it once no run of this store uses it
        app.store.ensure()
        store_images.note(app.store.dir, store_images.ImageUse(built.id, None, made=True))
    if as_json:
        data = dataclasses.asdict(built)
        data.pop("dockerfile_text")
        ui.json_out(schemas.answer("build", data))
        return
    how = "reused" if built.reused else f"built in {built.build_seconds:.1f}s"
    ui.out(f"{built.tag}  {built.id}  ({how})")


@click.command("base-image")
@click.option("--tag", default=None, help="Tag for the new image (default: image.base, repro-base:bookworm).")
@click.option("--suite", default="bookworm", show_default=True, help="Debian suite to bootstrap.")
@click.option(
    "--mirror", default=None, help="Debian mirror (default: $REPRO_DEBIAN_MIRROR or deb.debian.org)."
)
@click.pass_obj
def base_image(app: Any, tag: str | None, suite: str, mirror: str | None) -> None:
    """Make a minimal Debian base image from packages (debootstrap + docker import, as root; without
    root: mmdebstrap --mode=unshare + podman import, into your rootless Podman storage).

    For engines that reach no container registry: only the Debian mirror is used. The image holds
    python3 and venv, and g++ with the Python headers for torch.compile; its labels name them.
    Prints the new image's id; debootstrap's output goes to repro's cache (logs/), -v shows it.
    """
    from repro.backends.baseimage import make_base_image
    from repro.backends.registry import base_image_importer
    from repro.config import DEFAULT_BASE_IMAGE
    from repro.facts.lockfile import cache_dir

    if tag is None:
        tag = _settings_base(app) or DEFAULT_BASE_IMAGE
    import_rootfs, how = base_image_importer()
    ui.info(f"making base image {tag} from Debian {suite} ({how}; a few minutes)")
    with build_events(cache_dir(), "base-image") as sink:  # no project needed: the log goes to repro's cache
        sink(Event("stage", f"base image: Debian {suite}: {how}"))
        made = make_base_image(
            import_rootfs,
            tag=tag,
            suite=suite,
            mirror=mirror,
            on_line=lambda line: sink(Event("build", line)),
        )
        sink(Event("stage-end"))
    ui.info(f"{made.tag} made in {made.seconds:.0f}s")
    ui.out(made.id)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _settings_base(app: Any) -> str | None:
    # base-image may run before any project exists: settings are optional.
    try:
        return str(app.settings.base_image)
    except ReproError:
        return None


@click.command("gc")
@click.option(
    "--images",
    "with_images",
    is_flag=True,
    help="Also remove images this store's runs made (built or loaded) that none of its runs uses now.",
)
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.pass_obj
def gc(app: Any, with_images: bool, dry_run: bool) -> None:
    """Remove leftovers: incomplete runs, partial blobs, containers of runs whose repro died,
    kept checkpoint copies and outputs of older runs over store.max_bytes (then says the bytes
    and files freed);
    with --images, images this store's runs made that no run still in the store uses (never
    another store's, the base image, one built on top of it or tagged outside repro-env), and the
    image archives Slurm jobs' nodes loaded them from (and those images from the nodes' Podman
    storages this machine sees).
    Works on a full disk.

    Files a docker run killed with its repro wrote in its copy of the project (checkpoints)
    are moved into the project first, where the run would have put them; a run whose copy
    cannot be brought back (a process or container of it still runs) is kept, and said so.
    The hidden working directory of a `repro export` whose process died is removed too."""
    store = app.store
    verb = "would remove" if dry_run else "removed"
    found = 0
    for name in _stale_containers(store, dry_run):  # first: a run's copy is recovered once they are gone
        ui.out(f"{verb} container {name} (its repro process is gone)")
        found += 1
    found += _incomplete_runs(store, dry_run)
    freed_bytes = freed_files = 0
    for path in store.partial_blobs():
        freed_bytes += _size(path)
        freed_files += 1
        if not dry_run:
            path.unlink(missing_ok=True)
        ui.out(f"{verb} partial blob {path.name}")
        found += 1
    over = budget.enforce(store, app.settings.max_bytes, dry_run)  # a bad value: its ConfigError
    if over.files:
        ui.out(
            f"{verb} {plural(over.files, 'kept file')} of older runs over store.max_bytes "
            f"({ui.human_bytes(over.bytes)}; marked not kept in {plural(len(over.runs), 'record')})"
        )
        freed_bytes += over.bytes
        freed_files += over.files
        found += over.files
    if freed_files:
        done = "would free" if dry_run else "freed"
        ui.out(f"{done} {ui.human_bytes(freed_bytes)} in {plural(freed_files, 'file')}")
    for left in export.leftovers(store):  # what an export killed mid-way left beside its file
        if not dry_run:
            export.remove(left)
        if left.work is not None:
            ui.out(f"{verb} {left.work} ({ui.human_bytes(left.size)}, left by a killed `repro export`)")
            found += 1
    if not with_images:
        if not found:
            ui.info("nothing to remove (pass --images to remove unused images too)")
        return
    _unused_images(store, app.settings.base_image, dry_run)


def _unused_images(store: Any, base: str, dry_run: bool) -> None:
    """Remove the images this store made that none of its runs uses any more, and say what was
    removed, what was kept and why, and the space freed."""
    verb = "would remove" if dry_run else "removed"
    _node_images(store, dry_run)
    unused = store_images.unused(store)
    if not unused:
        ui.info("no unused images of this store")
        return
    from repro.backends.docker.gc import remove_images

    sweep = remove_images(unused, base, dry_run=dry_run)
    if not dry_run:
        store_images.forget(store.dir, {img.id for img in sweep.removed} | set(sweep.gone))
    for img in sweep.removed:
        ui.out(f"{verb} image {_image_name(img.id, img.tags)} ({ui.human_bytes(img.size)} of its own)")
    for img, why in sweep.kept:
        ui.out(f"kept image {_image_name(img.id, img.tags)}: {why}")
    if sweep.freed is not None:
        ui.out(f"freed {ui.human_bytes(sweep.freed)} in the engine's image storage")
    elif sweep.removed:
        ui.out(f"would free at least {ui.human_bytes(sum(img.size for img in sweep.removed))}")
    if not sweep.removed and not sweep.kept:
        ui.info("no unused images of this store")


def _node_images(store: Any, dry_run: bool) -> None:
    """The image archives a Slurm job's nodes loaded that no run uses, and their images in the nodes'
    Podman storages this machine sees (each node loads one again from an archive where it needs it)."""
    from repro.backends.slurm.images import prune_node_storages, unused_archives

    verb = "would remove" if dry_run else "removed"
    archives = unused_archives(store.dir, store_images.needed(store))
    for archive in archives:
        size = ui.human_bytes(_size(archive))
        ui.out(f"{verb} image archive {archive.name} ({size}, for a Slurm job's nodes)")
        if not dry_run:
            archive.unlink(missing_ok=True)
    for done in prune_node_storages([f"sha256:{a.stem}" for a in archives], dry_run):
        where = f"image {done.image[:19]} in node {done.node}'s Podman storage"
        ui.out(f"{verb} {where}" if done.removed else f"kept {where}: {done.why}")


def _image_name(image_id: str, tags: list[str]) -> str:
    return f"{', '.join(tags)} ({image_id[:19]})" if tags else image_id[:19]


def _incomplete_runs(store: Any, dry_run: bool) -> int:
    """Remove runs whose repro process died, after bringing back what a docker run left in its
    copy of the project; a run whose copy cannot be recovered yet is kept, and said so."""
    count = 0
    for run_id in [row.id for row in store.rows(helpers=True) if row.status == "incomplete"]:
        try:
            files = leftover.changed(store, run_id) if dry_run else leftover.recover(store, run_id)
        except ReproError as e:
            ui.out(f"kept incomplete run {run_id}: {e}" + (f" ({e.hint})" if e.hint else ""))
            continue
        except OSError as e:
            ui.out(f"kept incomplete run {run_id}: its copy of the project could not be brought back ({e})")
            continue
        if files:
            shown = ", ".join(files[:5]) + (f" (+{len(files) - 5} more)" if len(files) > 5 else "")
            verb = "would bring back" if dry_run else "brought back"
            ui.out(f"{verb} {plural(len(files), 'file')} run {run_id} wrote in its container's copy: {shown}")
        if not dry_run:
            store.remove_run(run_id)
        ui.out(f"{'would remove' if dry_run else 'removed'} incomplete run {run_id}")
        count += 1
    return count


def _stale_containers(store: Any, dry_run: bool) -> list[str]:
    """Containers this store's runs left behind, in the Docker engine when one answers and in this
    user's rootless Podman (none otherwise)."""
    from repro.backends.docker.engine import engine_available
    from repro.backends.docker.gc import remove_stale_containers
    from repro.backends.podman.gc import remove_stale_containers as remove_in_podman

    if not store.dir.is_dir():
        return []
    found = remove_stale_containers(store.dir, dry_run=dry_run) if engine_available() else []
    return [*found, *remove_in_podman(store.dir, dry_run=dry_run)]
