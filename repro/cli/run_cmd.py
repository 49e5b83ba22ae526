"""`repro run`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from repro import start, ui
from repro.cli.context import AppContext, pass_app
from repro.cli.events import Relay, progress_factory, raise_for_status, sigterm_interrupts
from repro.cli.options import BackendFlags, SectionedCommand, backend_flags, execution_options, json_option
from repro.config import Flags, Layer, Plan, Rank
from repro.errors import Interrupted
from repro.run.capture import expand
from repro.run.prepared import RunRequest
from repro.store.record import Record
from repro.ui import records as render


@click.command(
    "run",
    cls=SectionedCommand,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@execution_options
@backend_flags
@click.option(
    "--mlflow-log-capsule/--no-mlflow-log-capsule",
    default=None,
    help="Log the exported capsule as an artifact of the MLflow runs the command starts "
    "(repro.yaml: mlflow.log_capsule).",
)
@json_option(
    "Print the result as one JSON document on stdout (schemas/run.json: id, status, run_dir, …); "
    "the command's stdout then goes to stderr."
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@pass_app
def run(
    app: AppContext,
    command: tuple[str, ...],
    flags: Flags,
    backend_flags: BackendFlags,
    mlflow_log_capsule: bool | None,
    as_json: bool,
) -> None:
    """Run COMMAND under repro and seal its record.

    \b
    repro run train.py --lr 0.02                         (a .py first argument runs it with python)
    repro run --seed 42 --data data -- python train.py --lr 0.02
    repro run --backend local --outputs ckpt -- python -m mypkg.train
    repro run --backend slurm --nodes 2 --partition gpu --time 01:00:00 train_ddp.py
    repro run -- torchrun --nproc-per-node 2 train.py   (the same as --nproc-per-node 2)
    repro run train.py optim.lr=0.1 +model.depth=3      (Hydra overrides are parameters)
    repro run train.py -m optim.lr=0.1,0.01             (a Hydra multirun: one run per job)

    Options for repro go before the command (or before `--`); everything after belongs
    to the command. Exit status 4 when the command fails (the run is still recorded).
    Secrets never enter the record: values of credential options (--api-key, --password,
    db.password=…) and credential-shaped text are stored as ***, said in one line; such a
    command cannot be replayed, so pass secrets through environment variables.

    The command's stdout is repro's stdout and its stderr repro's stderr, passed through
    unchanged as they come (`repro run train.py > log` keeps the script's stdout); repro's
    own lines, the result line included, go to stderr. When repro's output is a terminal,
    the command gets a pseudo-terminal there, so progress bars and colours behave as
    without repro; the recorded logs keep the text without the terminal's control codes.
    """
    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    plan = backend_flags.over(app.plan(flags))
    if mlflow_log_capsule is not None:
        given = {"mlflow_log_capsule": (mlflow_log_capsule, "--mlflow-log-capsule")}
        plan = plan.over(Layer(Rank.FLAG, given))
    requests = expand(RunRequest(argv=argv, cwd=Path.cwd()), plan)
    if backend_flags.detach:
        answers = [submit_and_report(app, request, plan, as_json) for request in requests]
    else:
        answers = [run_and_report(app, request, plan, as_json, backend_flags) for request in requests]
    if as_json:  # one document: a Hydra multirun answers once, with a run per job
        ui.json_out(answers[0][1] if len(answers) == 1 else render.multirun_dict([a for _, a in answers]))
    for record, _ in answers:
        if not backend_flags.detach:
            raise_for_status(record)


def submit_and_report(
    app: AppContext, request: RunRequest, plan: Plan, as_json: bool
) -> tuple[Record, dict[str, Any]]:
    """`--detach`: capture, submit the Slurm job and return; `repro ls` seals the run when the job ended.

    Returns the record as submitted and its JSON answer (printed by the caller with --json)."""
    store = app.store
    on_event = Relay(stdout_to_stderr=as_json)
    try:
        with sigterm_interrupts():
            r, job_id = start.submit(request, plan, store, on_event, progress_factory)
    except KeyboardInterrupt as e:
        raise Interrupted("interrupted before the job was submitted; nothing was recorded") from e
    if not as_json:
        ui.summary(
            f"run {r.id} submitted as job {job_id}; `repro ls` shows it, and seals it once the job ended"
        )
    return r, render.detached_dict(r, store.runs_dir / r.id, job_id)


def run_and_report(
    app: AppContext, request: RunRequest, plan: Plan, as_json: bool, backend_flags: BackendFlags
) -> tuple[Record, dict[str, Any]]:
    """Capture, execute (the backend's flags for this run only reach its options) and print the
    outcome line (not with --json).

    Returns the record and its JSON answer (printed by the caller with --json)."""
    store = app.store
    on_event = Relay(stdout_to_stderr=as_json)
    where = start.Start.from_settings(plan.settings)
    where = replace(where, options=backend_flags.options(where.backend, where.options))
    try:
        with sigterm_interrupts():
            record = start.run(request, plan, store, on_event, start=where, progress=progress_factory)
    except KeyboardInterrupt as e:
        raise Interrupted("interrupted before the command started; nothing was recorded") from e
    run_dir = store.runs_dir / record.id
    if not as_json:
        ui.summary(render.run_summary_line(record, run_dir, store.root))
        for warning in record.warnings:
            ui.warn(warning.message)
    return record, render.run_summary_dict(record, run_dir)
