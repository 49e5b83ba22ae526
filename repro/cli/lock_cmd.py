"""`repro lock`: compile or refresh the project's hash-pinned lockfile, or check that it is current."""

from __future__ import annotations

import time
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
from repro.facts import deps
from repro.units import plural


@click.command("lock")
@click.argument("packages", nargs=-1, metavar="[PKG]...")
@click.option("--upgrade", is_flag=True,
              help="Upgrade every package to the newest allowed version, or the PKGs named.")  # fmt: skip
@click.option("--check", "check_only", is_flag=True,
              help="Compile nothing; exit 1 when the lock is stale (inputs changed), as `uv lock --check`. "
              "For CI.")  # fmt: skip
@click.option("--variant", type=click.Choice(deps.VARIANTS), default="cpu", show_default=True,
              help="cpu: this machine's runs and CPU images; cuda: --gpus images (CUDA torch wheels "
              "for the image's platform).")  # fmt: skip
@options.cuda_index
@json_option("Print the outcome as JSON (schemas/lock.json).")
@pass_app
def lock(
    app: AppContext,
    packages: tuple[str, ...],
    upgrade: bool,
    check_only: bool,
    variant: str,
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

    The cpu lock holds each declared package at the version this interpreter has installed,
    so the lock describes what a local run runs. Runs never wait for a compile to start.
    The lockfile's header names the command that remakes it (`repro lock`). The cuda lock takes
    torch's CUDA wheels from cuda.index (named in its header) and is refused when its torch is a
    CPU build.
    """
    settings = app.plan(Flags(cuda_index=cuda_index)).settings
    root, configured, index = app.store.root, settings.requirements, settings.cuda_index
    if packages and not upgrade:
        raise UsageError("package names are only taken with --upgrade", hint="repro lock --upgrade PKG")
    if check_only:
        stale, why = deps.is_stale(root, configured, variant, index)
        if as_json:
            ui.json_out(_answer("check", variant, stale, why))
        if stale:
            raise LockStale(
                f"the {variant} lock is stale: {why}", hint="run `repro lock` and commit lockfiles/"
            )
        if not as_json:
            ui.out(f"ok: {why}")
        return
    start = time.monotonic()
    wanted = (list(packages) if packages else []) if upgrade else None
    with build_events(app.store.dir, "lock") as sink:
        if upgrade or deps.is_stale(root, configured, variant, index)[0]:
            how = " --upgrade" + "".join(f" {p}" for p in packages) if upgrade else ""
            sink(Event("stage", f"lock: pip-compile{how} of the {variant} lock"))

        def line(text: str) -> None:
            sink(Event("build", text))

        done = deps.relock(root, configured, variant, wanted, on_line=line, cuda_index=index)
        sink(Event("stage-end", f"lock: {plural(len(done.requirements), 'package')} resolved and hashed"))
    assert done.path is not None
    seconds = time.monotonic() - start
    how = f"compiled in {seconds:.1f}s" if done.compiled else "current, kept"
    rel = done.path.relative_to(root).as_posix() if done.path.is_relative_to(root) else str(done.path)
    if as_json:
        ui.json_out(_answer("compile", variant, False, how, rel, done.requirements, done.compiled, seconds))
        return
    cuda = f", CUDA {done.cuda}" if done.cuda else ""
    ui.out(f"{rel}: {plural(len(done.requirements), 'package')}{cuda} ({how})")


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


COMMANDS = [lock]
