"""`repro check`: the CI gate."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import click

from repro import check as core
from repro import ranges, ui
from repro.cli import figures, options, prove_options
from repro.cli.completion import complete_ref
from repro.cli.context import AppContext, pass_app
from repro.cli.events import on_event, progress_factory, raise_for_status, sigterm_interrupts
from repro.config import Flags, Plan
from repro.errors import Interrupted, UsageError
from repro.run.prepared import RunRequest
from repro.store.record import Record
from repro.store.signing import Trust
from repro.ui import check as render
from repro.ui import records as records_render
from repro.units import plural

_EPILOG = """\b
Exit status (stable; README "Exit codes"):
  0    reproduced: every run identical (or within --atol/--rtol in gpu/off modes)
  2    usage or configuration error
  3    backend unavailable (no Docker engine for --backend docker, no GPU for --gpus)
  4    the training command failed (its exit status and last stderr lines are shown)
  5    not reproduced: outputs, metrics or stdout differ, or the data changed (--against)
  6    the capsule given to --against is invalid, corrupt or tampered
  130  interrupted
"""


@click.command(
    "check",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    epilog=_EPILOG,
)
@options.execution_options
@click.option(
    "--runs",
    type=click.IntRange(ranges.RUNS.low, ranges.RUNS.high),
    default=core.DEFAULT_RUNS,
    show_default=True,
    help="How many times to run COMMAND; run 1 is compared with each later run.",
)
@click.option(
    "--interrupt",
    "interrupts",
    type=click.IntRange(ranges.INTERRUPTS.low, ranges.INTERRUPTS.high),
    default=None,
    metavar="N",
    help="Certify exact resume: run once uninterrupted, then N times SIGKILLed at a random point after "
    "a checkpoint and continued with `repro resume`; compare every rank's training state at the "
    "resume point and fail naming the first that differs (`rank 1: sampler.epoch 2 vs 1`).",
)
@click.option(
    "--control",
    is_flag=True,
    default=False,
    help="With --interrupt: once every resume is identical, kill and resume once more with the RNG "
    "states deliberately not restored (and, where the run has a DistributedSampler, once more with its "
    "epoch reset); fail (exit 5, control_not_caught) if one is not caught.",
)
@click.option(
    "--against",
    "against",
    metavar="CAPSULE",
    default=None,
    shell_complete=complete_ref,
    help="Replay this golden capsule (.tar or run ref) against the current code instead.",
)
@options.replay_options
@options.trust_options
@click.option(
    "--junit",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a JUnit XML report (one testcase per output, plus metrics and stdout).",
)
@prove_options.prove_options("the golden run with differences taken from today's check run (--against)")
@options.markdown_option("a summary")
@options.plot_option("run 1's and the first differing run's")
@options.html_option("the result")
@options.json_option("Print the result as JSON (schemas/check.json).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_app
def check(
    app: AppContext,
    command: tuple[str, ...],
    flags: Flags,
    runs: int,
    interrupts: int | None,
    control: bool,
    against: str | None,
    data_root: Path | None,
    allow_data_drift: bool,
    atol: float | None,
    rtol: float | None,
    junit: Path | None,
    markdown: str | None,
    as_json: bool,
    compare_stdout: bool | None,
    env: tuple[str, ...],
    trust: Trust | None,
    plot_path: Path | None,
    html_path: Path | None,
    prove: bool,
    budget: int | None,
    prove_steps: int | None,
) -> None:
    """Fail when a training command does not reproduce: the CI gate.

    \b
    repro check -- python train.py --epochs 1      run twice with one seed; exit 0 if identical, 5 if not
    repro check --runs 3 --junit report.xml -- python train.py
    repro check --against golden/capsule.tar       does today's code still reproduce the capsule?
    repro check --interrupt 2 --control -- python train.py   killed twice, resumed: still identical?
    repro check --markdown summary.md -- python train.py
    repro check --html report.html --plot curves.png -- python train.py

    Every run executes under repro with the same seed (--seed, or drawn once and reused)
    in strict mode unless --mode, REPRO_MODE or repro.yaml says otherwise, and is
    recorded in the store (kind "check"; runs 2..N with their verdict against run 1, as
    `repro ls` shows). Outputs, metrics and stdout of run 1 are compared with each later
    run; on a difference the outputs that differ and the first divergence are printed.
    Stdout compares with timings masked (compare.mask, compare.ignore_lines and
    compare.stdout in repro.yaml; --no-compare-stdout leaves it out); TensorBoard events
    and metric files by value.

    With --against, the capsule's recorded command is replayed against a fresh capture
    of the working tree (executed in a scratch directory; the tree is only read) and
    the current data; when the result differs, what changed since the capsule (code,
    dependencies, …) is printed as `repro diff` shows it. With --key (and --require-signed)
    the golden capsule's signature is checked first (exit 6 when it fails). A golden capsule
    is untrusted, as in `repro replay`: its command runs in the docker sandbox unless
    --backend local (or REPRO_BACKEND=local) says to run it on this machine, unsandboxed.
    """  # fmt: skip
    flags, proving = dataclasses.replace(flags, compare_stdout=compare_stdout), (budget, prove_steps)
    argv = _command(command, against, (interrupts, control), trust, env, as_json, markdown, prove, proving)
    plan = app.plan(flags)
    run = RunRequest(argv=argv, cwd=Path.cwd())

    announce = functools.partial(_announce, app=app)
    try:
        with sigterm_interrupts():
            if against:
                request = core.AgainstRequest(against, data_root, allow_data_drift, atol, rtol, trust, env)
                result = _against(app, request, plan, prove, proving)
            elif interrupts:
                result = core.run_interrupt_check(
                    run, app.store, plan, on_event, interrupts=interrupts, control=control, on_record=announce
                )
            else:
                result = core.run_check(
                    run, app.store, plan, on_event, runs=runs, atol=atol, rtol=rtol,
                    on_record=announce, progress=progress_factory,
                )  # fmt: skip
    except KeyboardInterrupt as e:
        raise Interrupted("check interrupted") from e
    _report(result, junit, markdown, as_json)
    _pictures(app, result, plot_path, html_path)
    if result.failed is not None:
        raise_for_status(result.failed)
    code = int(result.exit_code)
    if code:
        raise click.exceptions.Exit(code)


def _against(
    app: AppContext,
    request: core.AgainstRequest,
    plan: Plan,
    prove: bool,
    proving: tuple[int | None, int | None],
) -> core.CheckResult:
    """The check against a golden run; with ``prove``, a result that differs explained by experiment:
    the golden run re-executed with differences taken from today's check run (`repro.prove`)."""
    ui.contain_output()  # the golden capsule's command: its output cannot erase repro's lines
    result = core.run_against(request, app.store, plan, on_event)
    if not prove or result.diff is None or not result.diff.results_differ or len(result.records) < 2:
        return result
    from repro.prove import prove as run_proof

    golden, today = (app.store.load_run(r.id) for r in result.records[:2])
    result.diff.proof = run_proof(result.diff, golden, today, app.store, plan, on_event, *proving)
    return result


def _pictures(app: AppContext, result: core.CheckResult, plot: Path | None, html: Path | None) -> None:
    """--plot and --html: the curves of run 1 and the first run that differs, and the report page."""
    pair, verdict = figures.check_pair(result)
    causes = [c.reason for c in result.diff.likely_causes] if result.diff else []
    causes += [c.describe() for c in result.causes]
    proof = result.diff.proof if result.diff else None
    states = [(s.run, s.control or "—", r.text()) for s in result.states for r in s.ranks]
    figures.verdict_pictures(app.store, pair, verdict, "repro check", (plot, html), causes, proof, states)


def _command(
    command: tuple[str, ...], against: str | None, interrupt: tuple[int | None, bool], trust: Trust | None,
    env: tuple[str, ...], as_json: bool, markdown: str | None, prove: bool = False,
    proving: tuple[int | None, int | None] = (None, None),
) -> list[str]:  # fmt: skip
    """The command to check (none with --against).

    Raises:
        UsageError: options that do not go together, or neither a command nor --against.
    """
    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if against and argv:
        raise UsageError("give either a COMMAND or --against CAPSULE, not both")
    interrupts, control = interrupt
    if against and interrupts:
        raise UsageError("--interrupt checks a COMMAND; it cannot be combined with --against")
    if control and not interrupts:
        raise UsageError(
            "--control is the negative control of an interrupt check",
            hint="repro check --interrupt 1 --control -- python train.py",
        )
    options.output_forms(as_json, markdown)
    if trust is not None and not against:
        raise UsageError("--key and --require-signed check the capsule given to --against")
    if env and not against:
        raise UsageError("--env sets a recorded variable again: give it with --against CAPSULE")
    prove_options.check_budget(prove, *proving)
    if prove and not against:
        raise UsageError("--prove explains a check against a golden run", hint="give --against CAPSULE")
    if not against and not argv:
        raise UsageError(
            "no command to check", hint="repro check -- python train.py   (or --against capsule.tar)"
        )
    return argv


def _announce(record: Record, app: AppContext) -> None:
    ui.info(records_render.run_summary_line(record, app.store.runs_dir / record.id, app.store.root))


def _report(result: core.CheckResult, junit: Path | None, markdown: str | None, as_json: bool) -> None:
    if junit:
        junit.write_text(render.render_junit(result))
    if markdown:
        ui.write_document(markdown, render.render_markdown(result))
    if as_json:
        ui.json_out(render.render_json(result))
        return
    if markdown == options.STDOUT:
        return
    text = render.render_text(result, width=ui.line_width())
    if text:
        ui.out(text)
    if result.kind == "repeat" and result.records:
        ids = " ".join(r.id for r in result.records)
        ui.info(f"{plural(len(result.records), 'run')} recorded (seed {result.seed}): {ids}")
