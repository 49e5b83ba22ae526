"""Where a re-execution runs: the record's backend for a run made here, the container sandbox for one
that came from elsewhere unless the replaying command line names a host backend.

A run is *from elsewhere* (`LoadedRun.foreign`) when its record was read from a capsule file, was
imported from one into the store (the store's own mark, `Store.mark_foreign`: never anything the
record says), or was made from such a run (its replays, checks, resumes). Its code and command are
someone else's, so:

- it replays in the container sandbox (docker, else rootless Podman where no Docker engine answers,
  or the one the replaying side names: no network, no host paths but its scratch copy, a non-root
  user) whatever backend its record names, and whatever repro.yaml says (a project file can arrive
  with the capsule, in the same pull request);
- it runs on this machine (``local``, or ``slurm``, whose nodes share it) only when the replaying side
  names that backend itself: ``--backend local`` on the command line, or ``REPRO_BACKEND=local`` in
  the environment of the replaying process (a choice of the person or CI job replaying, never of
  the capsule). Then repro says, in one line, that the code runs unsandboxed;
- with no Docker engine and no host backend named, nothing runs: exit 3, the hint naming
  ``--backend local``.

A run made in this store replays where it ran (`Plan.with_recorded`), as before. Core only: returns
the plan and the line to print.
"""

from __future__ import annotations

from dataclasses import dataclass

from repro.backends import registry
from repro.config import Layer, Plan, Rank
from repro.errors import BackendUnavailable

CHOSEN_BY_REPLAYER = ("--backend", "REPRO_BACKEND")  # the sources a host backend counts from


@dataclass(frozen=True)
class Placement:
    """The plan a re-execution runs with (its backend decided), and what to tell about it."""

    plan: Plan
    note: str | None = None
    sandboxed: bool = False  # a run from elsewhere, in the sandbox: needs an engine


def place(plan: Plan, recorded: str, foreign: bool) -> Placement:
    """Decide the backend of a re-execution of a run recorded on ``recorded``.

    ``foreign``: the run came from elsewhere (`LoadedRun.foreign`).
    """
    if not foreign:
        return Placement(plan.with_recorded(backend=recorded))
    chosen, source = plan.settings.backend, plan.source("backend")
    host, sandbox = registry.on_host(), registry.sandbox_here()  # unsandboxed here; the container sandbox
    named = source in CHOSEN_BY_REPLAYER
    if named and chosen in host and registry.contains(chosen):
        return Placement(
            plan,
            f"{source} {chosen}: this run from elsewhere runs in the container sandbox ({sandbox}) on the "
            "nodes, on the host's network (its ranks meet over it)",
        )
    if named and chosen in host:
        return Placement(
            plan,
            f"{source} {chosen}: the code of this run from elsewhere runs unsandboxed on this machine "
            "(it can read, write and reach whatever you can)",
        )
    sandboxed = plan.over(Layer(Rank.FLAG, {"backend": (sandbox, source if named else "the sandbox")}))
    if named and registry.is_sandbox(chosen):  # the replaying side's own choice of sandbox
        return Placement(plan, sandboxed=True)
    ignored = ""
    if chosen in host:
        ignored = f"; {source}'s `backend: {chosen}` counts only for runs made here"
    elif recorded == sandbox:
        return Placement(sandboxed, sandboxed=True)  # where it ran already: nothing to tell
    return Placement(
        sandboxed,
        f"a run from elsewhere replays in the container sandbox (its record names backend {recorded}"
        f"{ignored}); --backend local runs its code on this machine, unsandboxed",
        sandboxed=True,
    )


def require_engine(placement: Placement) -> None:
    """Stop before anything runs when the sandbox a run from elsewhere needs is not here.

    Raises:
        BackendUnavailable: the sandbox's engine cannot run here (no Docker engine answers).
    """
    if not placement.sandboxed:
        return
    chosen = placement.plan.settings.backend
    if chosen != registry.sandbox() and not registry.available(chosen):
        raise BackendUnavailable(
            f"backend {chosen} cannot run here, and a run from elsewhere replays only in a container sandbox",
            hint="install and set up its engine, or pass --backend local to run its code on this machine, "
            "unsandboxed",
        )
    if not registry.available(chosen):
        raise BackendUnavailable(
            "no Docker engine answers, and a run from elsewhere replays only in the container sandbox",
            hint="start a Docker engine (make docker-up), or pass --backend local to run its code on this "
            "machine, unsandboxed",
        )
