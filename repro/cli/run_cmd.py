"""`repro run`."""

from __future__ import annotations

import contextlib
import functools
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import click

from repro import runner, ui
from repro.backends.base import Event
from repro.capsule import Record
from repro.cli.context import AppContext, pass_app
from repro.config import BACKENDS, MODES, Settings
from repro.errors import CommandFailed, Interrupted
from repro.ui import records as render


def on_event(event: Event) -> None:
    """Render backend progress: build lines, live logs, notices."""
    if event.kind == "log":
        ui.log_line(event.text, event.stream or "stdout")
    elif event.kind == "build":
        ui.build_line(event.text)
    else:
        ui.info(event.text)


def progress_factory(label: str) -> ui.ProgressCallback:
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


@dataclass(frozen=True)
class Execution:
    """The execution options shared by `run` and `check`, as one value."""

    backend: str | None
    seed: int | None
    mode: str | None
    data: tuple[str, ...]
    outputs: tuple[str, ...]
    threads: int | None
    isa: str | None
    nproc_per_node: int
    gpus: str | None
    network: bool | None
    trace: bool | None

    def request(self, argv: list[str], mode: str | None = None) -> runner.RunRequest:
        return runner.RunRequest(
            argv=argv,
            cwd=Path.cwd(),
            seed=self.seed,
            mode=mode or self.mode,
            backend=self.backend,
            nproc_per_node=self.nproc_per_node,
            gpus=self.gpus,
            network=self.network,
            trace=self.trace,
            data=list(self.data),
            outputs=list(self.outputs),
        )

    def settings(self, base: Settings) -> Settings:
        return base.with_overrides(threads=self.threads, isa=self.isa)


_EXECUTION_FIELDS = tuple(Execution.__dataclass_fields__)


def execution_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared execution options; the command receives them as `execution: Execution`."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["execution"] = Execution(**{name: kwargs.pop(name) for name in _EXECUTION_FIELDS})
        return f(*args, **kwargs)

    for option in reversed(
        [
            click.option(
                "--backend",
                type=click.Choice(BACKENDS),
                default=None,
                help="Where to execute (auto: docker when an engine answers, else local).",
            ),
            click.option("--seed", type=int, default=None, help="Master seed (default: drawn and recorded)."),
            click.option(
                "--mode",
                type=click.Choice(MODES),
                default=None,
                help="Determinism: strict (CPU, bit-for-bit; default), gpu (near-exact), off.",
            ),
            click.option(
                "--data",
                "data",
                multiple=True,
                metavar="PATH",
                help="Declared input data (repeatable); hashed and checked on replay.",
            ),
            click.option(
                "--outputs",
                "outputs",
                multiple=True,
                metavar="DIR",
                help="Output directory (repeatable; default: outputs).",
            ),
            click.option(
                "--threads", type=int, default=None, help="Intra-op threads in strict/gpu mode (1)."
            ),
            click.option(
                "--isa",
                type=click.Choice(["auto", "avx2", "avx512", "default", "none"]),
                default=None,
                help="CPU kernel ISA pin for strict replay across hosts (auto: avx2 when present).",
            ),
            click.option(
                "--nproc-per-node",
                type=click.IntRange(1),
                default=1,
                help="Launch N processes through torchrun --standalone.",
            ),
            click.option(
                "--gpus", default=None, metavar="all|N", help="GPUs to give the run (exit 3 if none)."
            ),
            click.option(
                "--network/--no-network",
                default=None,
                help="Allow network access inside the container (default: none; recorded).",
            ),
            click.option(
                "--trace/--no-trace",
                default=None,
                help="Record each parameter's fingerprint after every optimizer step, so a replay "
                "names the first step and parameter that diverged.",
            ),
        ]
    ):
        wrapper = option(wrapper)
    return wrapper


@click.command(
    "run",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@execution_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (id, status, capsule, …).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@pass_app
def run(app: AppContext, command: tuple[str, ...], execution: Execution, as_json: bool) -> None:
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
    record = run_and_report(app, execution.request(argv), execution.settings(app.settings), as_json)
    _raise_for_status(record)


def run_and_report(app: AppContext, request: runner.RunRequest, settings: Settings, as_json: bool) -> Record:
    """Capture, execute and print the outcome; shared by `run` and `check`."""
    store = app.store
    prepared: runner.Prepared | None = None
    try:
        with sigterm_interrupts():
            prepared = runner.capture(request, settings, store, on_event, progress_factory)
            backend = runner.select_backend(
                request.backend or settings.backend, on_event, need_lock=prepared.spec.lockfile is not None
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


def _raise_for_status(record: Record) -> None:
    status = record.results.status
    if status == "interrupted":
        raise Interrupted(f"interrupted; run {record.id} recorded as interrupted")
    if status == "failed":
        tail = record.results.stderr_tail[-10:]
        for line in tail:
            ui.log_line(line, "stderr")
        raise CommandFailed(record.results.exit_code or 1, tail, record.id)


COMMANDS = [run]
