"""`repro run`."""

from __future__ import annotations

from pathlib import Path

import click

from repro import runner, ui
from repro.capsule import Record
from repro.cli.context import AppContext, pass_app
from repro.cli.events import on_event, progress_factory, raise_for_status, sigterm_interrupts
from repro.cli.options import execution_options
from repro.config import Flags, Plan
from repro.errors import Interrupted
from repro.ui import records as render


@click.command(
    "run",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (id, status, capsule, …).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@pass_app
def run(app: AppContext, command: tuple[str, ...], flags: Flags, as_json: bool) -> None:
    """Run COMMAND under repro and seal its record.

    \b
    repro run train.py --lr 0.02                         (a .py first argument runs it with python)
    repro run --seed 42 --data data -- python train.py --lr 0.02
    repro run --backend local --outputs ckpt -- python -m mypkg.train

    Options for repro go before the command (or before `--`); everything after belongs
    to the command. Exit status 4 when the command fails (the run is still recorded).
    """
    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    request = runner.RunRequest(argv=argv, cwd=Path.cwd())
    record = run_and_report(app, request, app.plan(flags), as_json)
    raise_for_status(record)


def run_and_report(app: AppContext, request: runner.RunRequest, plan: Plan, as_json: bool) -> Record:
    """Capture, execute and print the outcome; shared by `run` and `check`."""
    store = app.store
    prepared: runner.Prepared | None = None
    try:
        with sigterm_interrupts():
            prepared = runner.capture(request, plan, store, on_event, progress_factory)
            backend = runner.select_backend(
                plan.settings.backend, on_event, need_lock=prepared.spec.lockfile is not None
            )
            r = prepared.record
            ui.info(
                f"run {r.id} · backend {backend.name} · mode {r.determinism.mode} · seed {r.seeds.master}"
            )
            record = runner.execute(prepared, backend, store, on_event)
    except KeyboardInterrupt as e:
        if prepared is not None:
            runner.discard(prepared)
        raise Interrupted("interrupted before the command started; nothing was recorded") from e
    capsule = store.runs_dir / record.id
    if as_json:
        ui.json_out(render.run_summary_dict(record, capsule))
    else:
        ui.out(render.run_summary_line(record, capsule, store.root))
        for warning in record.warnings:
            ui.warn(warning)
    return record


COMMANDS = [run]
