"""`repro lock`: compile or refresh the project's hash-pinned lockfile, or check that it is current."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from repro import schemas, ui
from repro.backends.base import Event
from repro.cli import options
from repro.cli.context import AppContext, pass_app
from repro.cli.events import build_events
from repro.cli.options import json_option
from repro.config import Flags
from repro.errors import LockStale, UsageError
from repro.facts import lockplan, lockvariants, projectlock
from repro.fetch.reach import check_reachable
from repro.units import plural


@click.command("lock")
@click.argument("packages", nargs=-1, metavar="[PKG]...")
@click.option("--upgrade", is_flag=True,
              help="Upgrade every package to the newest allowed version, or the PKGs named.")  # fmt: skip
@click.option("--check", "check_only", is_flag=True,
              help="Compile nothing; exit 1 when the lock is stale (inputs changed), as `uv lock --check`. "
              "For CI.")  # fmt: skip
@click.option("--variant", type=click.Choice(lockvariants.VARIANTS), default="cpu", show_default=True,
              help="cpu: CPU images (the same for everyone; torch a CPU build); cuda: --gpus images "
              "(CUDA torch wheels for the image's platform); local: the local backend's runs (held at the "
              "versions installed here, kept in .repro/locks/).")  # fmt: skip
@click.option("--format", "fmt", type=click.Choice(["requirements", "pylock"]), default="requirements",
              show_default=True,
              help="pylock: also write the lock as a PEP 751 pylock.toml (lockfiles/pylock.toml, or "
              "--output), naming each file's URL on the host's package sources.")  # fmt: skip
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where --format pylock writes (a pylock.toml or pylock.NAME.toml).")  # fmt: skip
@options.cuda_index
@json_option("Print the outcome as JSON (schemas/lock.json).")
@pass_app
def lock(
    app: AppContext,
    packages: tuple[str, ...],
    upgrade: bool,
    check_only: bool,
    variant: str,
    fmt: str,
    output: Path | None,
    cuda_index: str | None,
    as_json: bool,
) -> None:
    """Compile the project's lockfile (pip-compile --generate-hashes): one progress line, the full log
    of pip-compile in .repro/logs/ (shown with -v, and on failure).

    \b
    repro lock                      compile when the inputs changed, else keep the lock
    repro lock --upgrade            re-resolve every package
    repro lock --upgrade torch      re-resolve only torch (and what it needs)
    repro lock --check              exit 1 when lockfiles/ is stale, 0 when current (CI)
    repro lock --format pylock      also write lockfiles/pylock.toml (PEP 751)

    A project with its own lockfile (uv.lock, then poetry.lock, then pylock.toml) is locked by
    it: repro reads it for the groups its tool installs by default (deps.groups in repro.yaml
    overrides), writes lockfiles/project.lock.txt from it, and never re-resolves it; a lockfile
    stale against pyproject.toml is an error naming the command that refreshes it (`uv lock`,
    `poetry lock`, `pip lock`), and --upgrade is that tool's work.

    The cpu lock depends only on the requirements, the index configuration and the platform:
    whichever virtual environment runs repro, it has the same bytes (commit lockfiles/); its torch
    must be a CPU build (`# torch-build: cpu` in its header). The local lock holds each declared
    package at the version this interpreter has installed, so it describes what a local run runs;
    it lives in .repro/locks/, never committed. Runs never wait for a compile to start.
    The lockfile's header names the command that remakes it (`repro lock`). The cuda lock takes
    torch's CUDA wheels from cuda.index (named in its header) and is refused when its torch is a
    CPU build.
    """
    settings = app.plan(Flags(cuda_index=cuda_index)).settings
    root, configured, index = app.store.root, settings.requirements, settings.cuda_index
    if packages and not upgrade:
        raise UsageError("package names are only taken with --upgrade", hint="repro lock --upgrade PKG")
    if output is not None and fmt != "pylock":
        raise UsageError(
            "--output is where --format pylock writes", hint="repro lock --format pylock -o FILE"
        )
    project = projectlock.find(root, configured)
    if check_only:
        _check(root, configured, variant, index, settings.groups, project, as_json)
        return
    start = time.monotonic()
    wanted = (list(packages) if packages else []) if upgrade else None
    with build_events(app.store.dir, "lock") as sink:
        if project is None and (upgrade or lockplan.is_stale(root, configured, variant, index)[0]):
            how = " --upgrade" + "".join(f" {p}" for p in packages) if upgrade else ""
            sink(Event("stage", f"lock: pip-compile{how} of the {variant} lock"))

        def line(text: str) -> None:
            sink(Event("build", text))

        done = lockplan.relock(
            root, configured, variant, wanted, line, index, settings.groups, reachable=check_reachable
        )
        if project is None:
            sink(Event("stage-end", f"lock: {plural(len(done.requirements), 'package')} resolved and hashed"))
        else:
            sink(Event("info", f"lock: {lockplan.describe_project_lock(done)}"))
        pylock = _write_pylock(root, done, output, sink) if fmt == "pylock" else None
    assert done.path is not None
    seconds = time.monotonic() - start
    how = f"compiled in {seconds:.1f}s" if done.compiled else "current, kept"
    how = f"read from {done.project_lock}" if done.project_lock else how
    rel = _rel(root, done.path)
    if as_json:
        body = _answer("compile", variant, False, how, rel, done.requirements, done.compiled, seconds)
        ui.json_out(body | {"source": done.project_lock, "groups": done.groups, "pylock": pylock})
        return
    cuda = f", CUDA {done.cuda}" if done.cuda else ""
    ui.out(f"{rel}: {plural(len(done.requirements), 'package')}{cuda} ({how})")
    if pylock:
        ui.out(f"{pylock}: the same lock as a PEP 751 pylock.toml")


def _check(
    root: Path,
    configured: str | None,
    variant: str,
    index: str | None,
    groups: tuple[str, ...] | None,
    project: Path | None,
    as_json: bool,
) -> None:
    """`repro lock --check`: exit 1 when the lock is stale, naming what refreshes it.

    Raises:
        LockStale: stale.
    """
    stale, why = lockplan.is_stale(root, configured, variant, index, groups)
    if as_json:
        ui.json_out(_answer("check", variant, stale, why))
    if stale:
        hint = "run `repro lock` and commit lockfiles/"
        if project is not None:
            hint = f"run {projectlock.refresh(project.name)} and commit {project.name}"
        raise LockStale(f"the {variant} lock is stale: {why}", hint=hint)
    if not as_json:
        ui.out(f"ok: {why}")


def _write_pylock(root: Path, done: lockplan.Lock, output: Path | None, sink: Any) -> str:
    """Write the lock as a PEP 751 pylock.toml (core: repro.fetch.locate); its path as shown."""
    from repro.fetch.locate import write_pylock

    assert done.path is not None
    sink(Event("info", "lock: naming each locked file's place on the package sources for pylock.toml"))
    dest = output if output is not None else root / lockvariants.LOCK_DIR / "pylock.toml"
    write_pylock(done.path.read_text(), dest)
    return _rel(root, dest)


def _rel(root: Path, path: Path) -> str:
    path = path if path.is_absolute() else Path.cwd() / path
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _answer(
    action: str,
    variant: str,
    stale: bool,
    reason: str,
    path: str | None = None,
    packages: list[str] | None = None,
    compiled: bool | None = None,
    seconds: float | None = None,
) -> dict[str, Any]:
    """`repro lock --json` (schemas/lock.json); a check leaves the compile's fields None."""
    body = {"action": action, "variant": variant, "stale": stale, "reason": reason, "path": path,
            "packages": packages, "compiled": compiled}  # fmt: skip
    return schemas.answer("lock", body | {"seconds": None if seconds is None else round(seconds, 3)})
