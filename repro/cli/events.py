"""What every executing command shares: progress rendering, SIGTERM as Ctrl-C, a failed run's exit."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

from repro import ui
from repro.backends.base import Event
from repro.capsule import Record
from repro.errors import CommandFailed, Interrupted


def on_event(event: Event) -> None:
    """Render backend progress: build lines, live logs, notices."""
    if event.kind == "log":
        ui.log_line(event.text, event.stream or "stdout")
    elif event.kind == "build":
        ui.build_line(event.text)
    else:
        ui.info(event.text)


def progress_factory(label: str) -> ui.ProgressCallback:
    """A byte progress bar for one labelled step (hashing data, …)."""
    return ui.byte_progress(label)


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Treat SIGTERM (a CI job cancelled, `kill`) like Ctrl-C while the block runs."""
    previous = signal.signal(signal.SIGTERM, _sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def raise_for_status(record: Record) -> None:
    """Show a failed run's last stderr lines and raise its error; nothing for a run that succeeded.

    Raises:
        Interrupted: the run was interrupted (exit 130).
        CommandFailed: the command failed (exit 4).
    """
    status = record.results.status
    if status == "interrupted":
        raise Interrupted(f"interrupted; run {record.id} recorded as interrupted")
    if status == "failed":
        tail = record.results.stderr_tail[-10:]
        for line in tail:
            ui.log_line(line, "stderr")
        code, why = record.results.exit_code or 1, record.results.failure
        failed = record.backend.details.get("failed")  # a multi-node job: the node and rank that failed
        if isinstance(failed, dict):
            message = (
                f"rank {failed.get('rank')} on node {failed.get('node')} failed (exit status {code}); "
                f"run {record.id} recorded as failed"
            )
            raise CommandFailed(code, tail, record.id, message=message)
        if why:  # repro knows why: a nondeterministic op under strict/gpu, a GPU hidden by strict mode
            message = f"{why['message']} (run {record.id}, recorded as failed)"
            raise CommandFailed(code, tail, record.id, message=message, hint=why.get("hint"))
        raise CommandFailed(code, tail, record.id)
