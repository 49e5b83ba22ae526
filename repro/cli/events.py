"""What every executing command shares: progress rendering, SIGTERM as Ctrl-C, a failed run's exit."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from repro import ui
from repro.errors import CommandFailed, Interrupted

if TYPE_CHECKING:  # the backends' types: a command that executes nothing (`repro export`) loads none
    from repro.backends import buildlog
    from repro.backends.base import Event, Terminal
    from repro.store.record import Record


class Relay:
    """Renders backend events: the command's output as it comes, build stages, notices.

    The command's stdout goes to repro's stdout, its stderr to repro's stderr. Where repro's
    stdout carries the command's result instead (``--json``, a replay's or a check's verdict),
    ``stdout_to_stderr`` sends the command's stdout to stderr.
    """

    def __init__(self, stdout_to_stderr: bool = False) -> None:
        self.stdout_to_stderr = stdout_to_stderr

    def _target(self, stream: str | None) -> str:
        return "stderr" if stream == "stderr" or self.stdout_to_stderr else "stdout"

    @property
    def terminal(self) -> Terminal:
        """The command's streams that end on a terminal: a backend gives them a pseudo-terminal."""
        from repro.backends.base import Terminal

        ends = {"stdout": sys.stdout, "stderr": sys.stderr}
        columns, lines = ui.terminal_size()
        return Terminal(
            stdout=ui.is_terminal(ends[self._target("stdout")]),
            stderr=ui.is_terminal(sys.stderr),
            columns=columns,
            lines=lines,
        )

    def __call__(self, event: Event) -> None:
        if event.kind == "output":
            ui.stage_end()
            ui.command_output(event.data, self._target(event.stream))
        elif event.kind == "stage":
            ui.stage(event.text)
        elif event.kind == "stage-end":
            ui.stage_end(event.text)
        elif event.kind == "build":
            ui.build_line(event.text)
        elif event.kind == "build-log":
            ui.build_log(event.text)
        else:
            ui.info(event.text)


on_event = Relay(stdout_to_stderr=True)  # where stdout carries a verdict or a listing


def build_events(store_dir: Path, name: str) -> buildlog.BuildLog:
    """The event sink of `repro build`, `repro lock`, `repro base-image`: a line per stage on the
    terminal, every raw line in ``.repro/logs/<time>-<name>.log``."""
    from repro.backends import buildlog

    return buildlog.BuildLog(buildlog.log_path(store_dir, name), Relay())


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
    """Raise a failed run's error; nothing for a run that succeeded. The failing rank's last stderr lines
    are printed first when several processes ran.

    Raises:
        Interrupted: the run was interrupted (exit 130).
        CommandFailed: the command failed (exit 4).
    """
    status = record.results.status
    if status == "interrupted":
        raise Interrupted(f"interrupted; run {record.id} recorded as interrupted")
    if status == "failed":
        tail = record.results.stderr_tail[-10:]
        if record.command.nproc_per_node * max(1, record.command.nodes) > 1:
            # The failing rank's own stderr, which the ranks' interleaved output did not show as such;
            # one process's tail is not printed again: its stderr was shown as it came.
            ui.failed_tail(tail)
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


def say_if_replay(record: Record, verb: str) -> None:
    """Say in one line when the run a command acts on is a replay, naming the original."""
    if not record.parent:  # no original to name: the renderers are not imported (`repro export` of a run)
        return
    from repro.ui.records import replay_note

    note = replay_note(record, verb)
    if note:
        ui.info(note)
