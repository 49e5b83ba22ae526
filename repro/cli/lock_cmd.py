"""`repro lock`: compile or refresh the project's hash-pinned lockfile, or check that it is current."""

from __future__ import annotations

import time

import click

from repro import ui
from repro.backends.base import Event
from repro.capture import deps
from repro.cli.context import AppContext, pass_app
from repro.cli.events import build_events
from repro.errors import ConfigError, UsageError
from repro.units import plural


class LockStale(ConfigError):
    """The lockfile was compiled from other inputs than today's (`repro lock --check`)."""


@click.command("lock")
@click.argument("packages", nargs=-1, metavar="[PKG]...")
@click.option("--upgrade", is_flag=True,
              help="Upgrade every package to the newest allowed version, or the PKGs named.")  # fmt: skip
@click.option("--check", "check_only", is_flag=True,
              help="Compile nothing; exit 2 when the lock is stale (inputs changed). For CI.")  # fmt: skip
@click.option("--variant", type=click.Choice(deps.VARIANTS), default="cpu", show_default=True,
              help="cpu: this machine's runs and CPU images; cuda: --gpus images (CUDA torch wheels "
              "for the image's platform).")  # fmt: skip
@pass_app
def lock(app: AppContext, packages: tuple[str, ...], upgrade: bool, check_only: bool, variant: str) -> None:
    """Compile the project's lockfile (pip-compile --generate-hashes): one progress line, the full log
    of pip-compile in .repro/logs/ (shown with -v, and on failure).

    \b
    repro lock                      compile when the inputs changed, else keep the lock
    repro lock --upgrade            re-resolve every package
    repro lock --upgrade torch      re-resolve only torch (and what it needs)
    repro lock --check              exit 2 when lockfiles/ is stale (CI)

    The cpu lock holds each declared package at the version this interpreter has installed,
    so the lock describes what a local run runs. Runs never wait for a compile to start.
    """
    root, configured = app.store.root, app.settings.requirements
    if packages and not upgrade:
        raise UsageError("package names are only taken with --upgrade", hint="repro lock --upgrade PKG")
    if check_only:
        stale, why = deps.is_stale(root, configured, variant)
        if stale:
            hint = "run `repro lock` and commit lockfiles/"
            raise LockStale(f"the {variant} lock is stale: {why}", hint=hint)
        ui.out(f"ok: {why}")
        return
    start = time.monotonic()
    wanted = (list(packages) if packages else []) if upgrade else None
    with build_events(app.store.dir, "lock") as sink:
        if upgrade or deps.is_stale(root, configured, variant)[0]:
            how = " --upgrade" + "".join(f" {p}" for p in packages) if upgrade else ""
            sink(Event("stage", f"lock: pip-compile{how} of the {variant} lock"))
        done = deps.relock(root, configured, variant, wanted, on_line=lambda line: sink(Event("build", line)))
        sink(Event("stage-end", f"lock: {plural(len(done.requirements), 'package')} resolved and hashed"))
    assert done.path is not None
    how = f"compiled in {time.monotonic() - start:.1f}s" if done.compiled else "current, kept"
    rel = done.path.relative_to(root).as_posix() if done.path.is_relative_to(root) else str(done.path)
    ui.out(f"{rel}: {len(done.requirements)} packages ({how})")


COMMANDS = [lock]
