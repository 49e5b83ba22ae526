"""Start a run: choose its backend, say so in one line, execute — the one way every run starts.

`repro run`, `repro check` (and the `repro_check` fixture through it), `repro replay` and
`repro resume` start each of their runs here, so the steps cannot drift apart:

    capture (a new run) → choose the backend → ``<head> · backend B · mode M · seed S`` → execute

Here, and only here, live the rule "must an image be built" (`must_build_image`: the run has
dependencies to lock) and the restore of a recorded run's lockfile (`restore_lockfile`). Core
only: the status line goes out as an ``info`` event; the sealed record comes back.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from repro.backends.base import Backend, Event, OnEvent
from repro.config import Plan, Settings
from repro.run.capture import capture
from repro.run.execute import backend_options, select_backend, submit_detached
from repro.run.execute import execute as execute_run
from repro.run.prepared import Prepared, ProgressFactory, RunRequest, discard
from repro.store.record import Record
from repro.store.rundir import RunDir
from repro.store.runs import LoadedRun, Store


@dataclass
class Start:
    """Where the runs of one command start: the backend asked for, chosen once for all of them.

    ``base_image``: with `auto`, docker is chosen only when the engine holds it (a new run's rule;
    a re-execution names none).
    """

    backend: str  # auto or a name in `repro.backends.registry`
    options: object = None  # the backend's own (Slurm: the allocation)
    base_image: str | None = None
    chosen: Backend | None = None  # the first run's choice; every later run of the command uses it

    @classmethod
    def from_settings(cls, settings: Settings) -> Start:
        """A new run's: the backend, its options and the base image the settings ask for."""
        return cls(settings.backend, backend_options(settings), settings.base_image)

    def backend_for(self, prepared: Prepared, on_event: OnEvent) -> Backend:
        """The backend the run executes on: chosen for the first run (`repro.run.execute.select_backend`),
        kept after.

        Raises:
            BackendUnavailable: the backend asked for cannot run here.
        """
        if self.chosen is None:
            self.chosen = select_backend(
                self.backend,
                on_event,
                need_lock=must_build_image(prepared),
                options=self.options,
                base_image=self.base_image,
            )
        return self.chosen


def must_build_image(prepared: Prepared) -> bool:
    """Whether the run has dependencies to lock, and so an image to build (`auto` picks docker only then).

    A re-execution has its recorded lockfile (`restore_lockfile`); a new run has a lock being
    compiled from the project's requirements.
    """
    lock = prepared.lock
    return prepared.lockfile is not None or (lock is not None and lock.source is not None)


def restore_lockfile(
    record: Record, read_blob: Callable[[str | None], bytes | None], run_dir: Path
) -> Path | None:
    """Write the lockfile of a recorded run into the run directory of its re-execution; None when
    the run was not locked.

    Raises:
        CapsuleInvalid: the stored lockfile does not match its recorded hash.
    """
    raw = read_blob(record.deps.lock_blob)
    if raw is None:
        return None
    path = RunDir(run_dir).lockfile
    path.write_bytes(raw)
    return path


def status_line(head: str, backend: str, record: Record, mode: str | None = None) -> str:
    """``<head> · backend B · mode M · seed S``: what a run is about to do, said once as it starts."""
    shown = mode or record.determinism.mode
    return f"{head} · backend {backend} · mode {shown} · seed {record.seeds.master}"


def execute(
    prepared: Prepared,
    start: Start,
    store: Store,
    on_event: OnEvent,
    *,
    head: str,
    mode: str | None = None,
    ready: Callable[[Backend], Sequence[str]] | None = None,
    before_seal: Callable[[LoadedRun], None] | None = None,
) -> Record:
    """Choose the backend, say the status line, execute, collect and seal (`repro.run.execute.execute`).

    ``ready`` sees the chosen backend before the line is said (a replay fits its environment to
    it) and returns notes to say after it; ``mode`` is the mode as the line shows it (default: the
    record's).

    Raises:
        BackendUnavailable: no backend can run it (the run directory is removed).
        BuildError, Interrupted: see `repro.run.execute.execute`.
    """
    try:
        backend = start.backend_for(prepared, on_event)
        then = ready(backend) if ready is not None else ()
    except BaseException:
        shutil.rmtree(prepared.run_dir, ignore_errors=True)  # the command never started: nothing to keep
        raise
    on_event(Event("info", status_line(head, backend.name, prepared.record, mode)))
    for note in then:
        on_event(Event("info", note))
    return execute_run(prepared, backend, store, on_event, before_seal)


def run(
    request: RunRequest,
    plan: Plan,
    store: Store,
    on_event: OnEvent,
    *,
    start: Start | None = None,
    head: str = "run",
    prepare: Callable[[Prepared], None] | None = None,
    progress: ProgressFactory | None = None,
    before_seal: Callable[[LoadedRun], None] | None = None,
) -> Record:
    """Capture a new run of ``request`` and `execute` it; returns the sealed record.

    The status line starts with ``head`` and the run's id. ``start`` defaults to the plan's
    backend; ``prepare`` may adjust the captured run before
    it starts (a check's later runs take the first run's clock). A Ctrl-C before the command
    started leaves nothing behind.

    Raises:
        UsageError, NotFoundError, BuildError: see `repro.run.capture.capture`.
        BackendUnavailable: no backend can run it.
    """
    prepared = capture(request, plan, store, on_event, progress)
    try:
        if prepare is not None:
            prepare(prepared)
        start = start or Start.from_settings(plan.settings)
        head = f"{head} {prepared.record.id}"
        return execute(prepared, start, store, on_event, head=head, before_seal=before_seal)
    except KeyboardInterrupt:
        discard(prepared)
        raise


def submit(
    request: RunRequest,
    plan: Plan,
    store: Store,
    on_event: OnEvent,
    progress: ProgressFactory | None = None,
) -> tuple[Record, str]:
    """Capture a new run and submit it as a Slurm job no process waits for (`--detach`);
    returns its record as submitted and the job id. `repro ls` seals it once the job ended.

    Raises:
        UsageError, NotFoundError, BuildError: see `repro.run.capture.capture`.
        BackendUnavailable: Slurm cannot take it.
    """
    from repro.backends.slurm.backend import SlurmBackend
    from repro.backends.slurm.options import SlurmOptions

    prepared = capture(request, plan, store, on_event, progress)
    options = backend_options(plan.settings)  # --detach is Slurm's alone
    backend = SlurmBackend(options if isinstance(options, SlurmOptions) else None)
    record = prepared.record
    on_event(Event("info", status_line(f"run {record.id}", backend.name, record) + " · detached"))
    return record, submit_detached(prepared, backend, store, on_event)
