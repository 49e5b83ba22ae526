"""`repro run`."""

from __future__ import annotations

from pathlib import Path

import click

from repro import runner, ui
from repro.capsule import Record
from repro.cli.context import AppContext, pass_app
from repro.cli.events import Relay, progress_factory, raise_for_status, sigterm_interrupts
from repro.cli.options import SlurmFlags, execution_options, slurm_options
from repro.config import Flags, Layer, Plan, Rank
from repro.errors import Interrupted
from repro.ui import records as render


@click.command(
    "run",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@execution_options
@slurm_options
@click.option(
    "--mlflow-log-capsule/--no-mlflow-log-capsule",
    default=None,
    help="Log the exported capsule as an artifact of the MLflow runs the command starts "
    "(repro.yaml: mlflow.log_capsule).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the result as one JSON document on stdout (id, status, capsule, …); the command's "
    "stdout then goes to stderr.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@pass_app
def run(
    app: AppContext,
    command: tuple[str, ...],
    flags: Flags,
    slurm: SlurmFlags,
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
    plan = slurm.over(app.plan(flags))
    if mlflow_log_capsule is not None:
        given = {"mlflow_log_capsule": (mlflow_log_capsule, "--mlflow-log-capsule")}
        plan = plan.over(Layer(Rank.FLAG, given))
    requests = runner.expand(runner.RunRequest(argv=argv, cwd=Path.cwd()), plan)
    if slurm.detach:
        for request in requests:
            submit_and_report(app, request, plan, as_json)
        return
    records = [run_and_report(app, request, plan, as_json) for request in requests]
    for record in records:
        raise_for_status(record)


def submit_and_report(app: AppContext, request: runner.RunRequest, plan: Plan, as_json: bool) -> None:
    """`--detach`: capture, submit the Slurm job and return; `repro ls` seals the run when the job ended."""
    from repro import detached
    from repro.backends.slurm import SlurmBackend

    store = app.store
    on_event = Relay(stdout_to_stderr=as_json)
    try:
        with sigterm_interrupts():
            prepared = runner.capture(request, plan, store, on_event, progress_factory)
            backend = SlurmBackend(runner.slurm_options(plan.settings))
            r = prepared.record
            ui.info(
                f"run {r.id} · backend slurm · mode {r.determinism.mode} · seed {r.seeds.master} · detached"
            )
            job_id = detached.submit(prepared, backend, store, on_event)
    except KeyboardInterrupt as e:
        raise Interrupted("interrupted before the job was submitted; nothing was recorded") from e
    if as_json:
        ui.json_out({"id": r.id, "status": "pending", "job_id": job_id, "detached": True})
    else:
        ui.summary(
            f"run {r.id} submitted as job {job_id}; `repro ls` shows it, and seals it once the job ended"
        )


def run_and_report(app: AppContext, request: runner.RunRequest, plan: Plan, as_json: bool) -> Record:
    """Capture, execute and print the outcome; shared by `run` and `check`."""
    store = app.store
    on_event = Relay(stdout_to_stderr=as_json)
    prepared: runner.Prepared | None = None
    try:
        with sigterm_interrupts():
            prepared = runner.capture(request, plan, store, on_event, progress_factory)
            backend = runner.select_backend(
                plan.settings.backend,
                on_event,
                need_lock=prepared.declares_deps,
                slurm=runner.slurm_options(plan.settings),
                base_image=prepared.spec.base_image,
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
        ui.summary(render.run_summary_line(record, capsule, store.root))
        for warning in record.warnings:
            ui.warn(warning)
    return record


COMMANDS = [run]
