"""What a run whose repro process died left in its run directory, brought back once nothing of it runs.

A docker run writes into a copy of the project in its work directory (`backends/scratch.py`)
that is moved back when the run ends. A repro process killed together with its run (SIGKILL, a
preempted node) leaves that copy behind, with the checkpoints the script saved into it, and
possibly host owners handed to the container user. `repro resume` (sealing the run as
interrupted) and `repro gc` bring it back here, the one way: only when neither a process of the
command nor a container of the run still runs, since either could still be writing.
"""

from __future__ import annotations

from pathlib import Path

from repro.backends import owners, scratch
from repro.errors import UsageError
from repro.store.runs import Store


def has_copy(store: Store, run_id: str) -> bool:
    """Whether the run left a copy of the project (or host owners) to recover."""
    work = _work(store, run_id)
    return (work / scratch.TREE).exists() or (work / owners.STATE).is_file()


def check_ended(store: Store, run_id: str) -> None:
    """Refuse while a process of the run's command, or a container of the run, still runs.

    Raises:
        UsageError: something of the run still runs (named, with how to stop it).
    """
    from repro.backends.local import run_processes

    alive = run_processes(run_id)
    if alive:
        raise UsageError(
            f"the repro process of run {run_id} is gone but processes of its command still run "
            f"(pid {', '.join(map(str, alive[:5]))})",
            hint="stop them first (kill PID), then resume",
        )
    if not has_copy(store, run_id):
        return  # a container runs only while its copy exists
    from repro.backends.docker.gc import live_containers

    names = live_containers(store.dir, run_id)
    if names:
        raise UsageError(
            f"the repro process of run {run_id} is gone but its container still runs ({', '.join(names)})",
            hint=f"stop it first (docker rm -f {names[0]}), then try again",
        )


def recover(store: Store, run_id: str) -> list[str]:
    """Move the files the run changed in its left-over copy back where it was copied from (the
    project), put owners back, drop the copy; those files (relative). Nothing when it left no copy.

    Raises:
        UsageError: a process or container of the run still runs.
        CapsuleInvalid: the copy's kept state is unreadable (the copy is left in place).
    """
    check_ended(store, run_id)
    if not has_copy(store, run_id):
        return []
    return scratch.recover(_work(store, run_id), store.root)


def changed(store: Store, run_id: str) -> list[str]:
    """The files `recover` would bring back, changing nothing (for `repro gc --dry-run`).

    Raises:
        CapsuleInvalid: the copy's kept state is unreadable.
    """
    found = scratch.left_over(_work(store, run_id))
    return found.changed if found is not None else []


def _work(store: Store, run_id: str) -> Path:
    return store.run_dir(run_id).work
