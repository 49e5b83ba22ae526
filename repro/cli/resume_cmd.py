"""`repro resume`."""

from __future__ import annotations

import click

from repro import resume as core
from repro import ui
from repro.cli.completion import complete_ref
from repro.cli.context import AppContext, pass_app
from repro.cli.events import Relay, raise_for_status, sigterm_interrupts
from repro.cli.options import backend_option, json_option
from repro.config import Flags
from repro.errors import Interrupted
from repro.store.runs import is_capsule_ref
from repro.ui import records as render


@click.command("resume")
@click.argument("ref", default="latest", shell_complete=complete_ref)
@backend_option("Execute on this backend (default: $REPRO_BACKEND, else the original run's).")
@json_option("Print the result as JSON (schemas/resume.json: id, status, resumed_from, …).")
@pass_app
def resume(app: AppContext, ref: str, backend: str | None, as_json: bool) -> None:
    """Continue an interrupted, failed or killed run as a new run linked to it.

    \b
    repro resume latest          the newest run, even one whose repro process was killed with it
    repro resume 20260101-1200   a run id or prefix
    repro resume run.tar         a capsule of a killed run (`repro export RUN -o run.tar --with-data`),
                                 continued in this directory, on another machine

    The recorded command runs again, with the same code, seed, mode, data and backend, in the
    project where the original's outputs (its checkpoints) are, so the script's own
    "load the checkpoint if present" logic continues from it. Every RNG state recorded when
    that checkpoint was saved is restored right after it is loaded: the resumed run ends
    bit for bit where an uninterrupted one ends (strict mode). Exit status 4 when the
    command fails; `repro ls` shows the new run as "resume of REF". A resumed run that
    loaded no checkpoint started over (a script that resumes only with a flag, such as
    nanoGPT's --init_from=resume): it says so at the end and in its record. So does a
    resumed Lightning fit about Lightning's own loop counters, which its checkpoint files
    may hold otherwise than an uninterrupted fit's (weights, optimizer and RNG exact).

    A docker run killed with its repro process left its checkpoints in the container's
    copy of the project: they are moved into the project first (once no process or
    container of the run still runs) and recorded as the killed run's outputs.

    A capsule is resumed as `repro replay CAPSULE` replays one: verified, imported (a run from
    elsewhere), its code restored into a copy beside the new run with its carried data and the
    killed run's kept outputs (its checkpoints) at their recorded paths, run in the docker sandbox
    (--backend local runs it unsandboxed) with no network and repro's own set of variables. The new
    outputs stay with the new run: `repro get RUN -o .` writes them here. A capsule of a run that
    succeeded, or one without its outputs, is refused (exit 2); an unsafe output path, exit 6.
    """
    store = app.store
    on_event = Relay(stdout_to_stderr=as_json)
    try:
        with sigterm_interrupts():
            record = core.resume(store, ref, app.plan(Flags(backend=backend)), on_event)
    except KeyboardInterrupt as e:
        raise Interrupted("interrupted before the command started; nothing was recorded") from e
    run_dir = store.runs_dir / record.id
    if as_json:
        ui.json_out(render.run_summary_dict(record, run_dir, kind="resume"))
    else:
        line = render.run_summary_line(record, run_dir, store.root)
        over = " that started over: it loaded no checkpoint" if record.results.resume_started_over else ""
        ui.summary(f"{line} · resume of {record.resumed_from}{over}")
        for warning in record.warnings:
            ui.warn(warning.message)
        if is_capsule_ref(ref):  # the copy it ran in is gone: its outputs are in the store
            ui.info(f"its outputs are kept with the run: `repro get {record.id} -o .` writes them here")
    raise_for_status(record)
