"""`repro replay`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from repro import ranges, ui
from repro.cli import figures, options
from repro.cli.completion import complete_ref
from repro.cli.context import AppContext, pass_app
from repro.cli.events import on_event, sigterm_interrupts
from repro.config import Flags, Plan
from repro.errors import Interrupted, UsageError
from repro.replay import run_replay
from repro.rerun.request import ReplayOutcome, ReplayRequest
from repro.store.limits import MAX_DATA_BYTES
from repro.store.signing import Trust
from repro.ui import verdict as render


@click.command("replay")
@click.argument("ref", default="latest", shell_complete=complete_ref)
@options.replay_backend
@options.replay_options
@click.option(
    "--nproc-per-node",
    type=click.IntRange(ranges.NPROC.low, ranges.NPROC.high),
    default=None,
    help="Replay with another number of processes (needs --allow-world-size-change).",
)
@click.option("--allow-world-size-change", is_flag=True, help="Allow a different world size.")
@click.option(
    "--from",
    "from_checkpoint",
    metavar="CHECKPOINT",
    default=None,
    help="Replay only a window: from this recorded checkpoint (its path, hash prefix or step:N) of a "
    "traced run, compared with the run's per-step trace.",
)
@click.option(
    "--steps",
    type=click.IntRange(ranges.STEPS.low, ranges.STEPS.high),
    default=None,
    help="With --from: optimizer steps to replay (default: up to the next recorded checkpoint).",
)
@click.option(
    "--threads",
    type=click.IntRange(ranges.THREADS.low, ranges.THREADS.high),
    default=None,
    metavar="N",
    help="Replay at N intra-op CPU threads instead of the recorded count (strict/gpu mode): recorded "
    "in the replay, and the verdict says the count differed. Without it the recorded N is used "
    "(REPRO_THREADS is ignored, and said to be).",
)
@click.option(
    "--network",
    is_flag=True,
    help="Give the replayed command a network. Off by default, whatever the capsule asks for.",
)
@options.max_data_size
@options.ops_options
@options.trust_options
@options.json_option("Print the verdict as JSON (schemas/replay.json).")
@options.markdown_option("the verdict")
@options.plot_option("the original's and the replay's")
@options.html_option("the verdict")
@pass_app
def replay(
    app: AppContext,
    ref: str,
    backend: str | None,
    data_root: Path | None,
    allow_data_drift: bool,
    atol: float | None,
    rtol: float | None,
    nproc_per_node: int | None,
    allow_world_size_change: bool,
    network: bool,
    as_json: bool,
    markdown: str | None,
    from_checkpoint: str | None,
    steps: int | None,
    compare_stdout: bool | None,
    env: tuple[str, ...],
    trust: Trust | None,
    plot_path: Path | None,
    html_path: Path | None,
    max_data_size: int | None,
    ops: bool | None,
    ops_steps: int | None,
    threads: int | None,
) -> None:
    """Re-execute a run from its record and prove whether the result came back.

    \b
    REF: a run id or prefix, latest, latest~N, a run directory, or a capsule .tar
    (replayable in any directory where its data is, at the same relative paths).

    \b
    Verdicts and exit status:
      identical         0   every output byte-identical, metrics and logs equal
      within_tolerance  0   gpu/off modes: tensors and metrics within --atol/--rtol
      diverged          5   with the first output, tensor, metric step or log line that differs
      failed            4   the replayed command failed
    Changed data stops the replay (exit 5) unless --allow-data-drift (for a run from elsewhere,
    differing data is then shown only from --data-root; .git, .repro and credentials never), or a
    copy is carried (`export --with-data`; placed read-only in the replay's copy) or fetched at its
    recorded version through DVC from the remote of that name this machine configures, and checked.
    A capsule is untrusted input: a path that leaves its root is refused (exit 6); it replays in the
    docker sandbox whatever backend it names (--backend local or REPRO_BACKEND=local runs its code
    on this machine, unsandboxed, and says so; no engine and neither: exit 3); the network stays off
    unless --network; of its recorded variables only the safe set is set again (--env NAME adds one;
    LD_*, PYTHON*, proxies never); only this machine's MLFLOW_TRACKING_URI is contacted (README
    "Security"). --key (--require-signed) checks the signature before anything runs: exit 6 if bad.

    \b
    Logs compare with timings masked (dates, clock times, ms/batch, it/s, mfu …); repro.yaml's
    compare.mask / compare.ignore_lines add patterns; --no-compare-stdout (or compare.stdout: false)
    leaves stdout out. TensorBoard event files compare per tag and step, JSON/JSONL/CSV metric
    files value by value; --json gives each reason a code and its fields.

    \b
    repro replay RUN --from step:4000 --steps 200   a window of a long traced run, in minutes
    repro replay RUN --plot curves.png --html report.html   both runs' curves, the first divergence marked
    repro replay RUN --ops   a divergence explained by its first differing tensor op
    A resumed run is replayed as one uninterrupted run of its chain (its outputs compared).
    """
    options.output_forms(as_json, markdown)
    request = ReplayRequest(
        ref=ref, data_root=data_root, allow_data_drift=allow_data_drift, atol=atol, rtol=rtol,
        allow_world_size_change=allow_world_size_change, nproc_per_node=nproc_per_node,
        from_checkpoint=from_checkpoint, steps=steps, network=network, trust=trust, env=env,
        max_data_size=max_data_size or MAX_DATA_BYTES, threads=threads,
    )  # fmt: skip
    ui.contain_output()  # the replayed code's output cannot move the cursor over repro's lines
    try:
        with sigterm_interrupts():
            flags = Flags(backend=backend, compare_stdout=compare_stdout, ops=ops, ops_steps=ops_steps)
            plan, request = _planned(app, request, flags)
            outcome = run_replay(request, app.store, plan, on_event)
    except KeyboardInterrupt as e:
        raise Interrupted("replay interrupted") from e
    _report(outcome, markdown, as_json)
    pair = (outcome.original, outcome.replay)
    figures.verdict_pictures(app.store, pair, outcome.verdict, f"repro replay {ref}", (plot_path, html_path))
    if outcome.verdict.exit_code:
        raise click.exceptions.Exit(int(outcome.verdict.exit_code))


def _planned(app: AppContext, request: ReplayRequest, flags: Flags) -> tuple[Plan, ReplayRequest]:
    """The plan, and the request with the op stream it asks for (``--ops``, ``ops:`` in repro.yaml)."""
    if request.steps is not None and request.from_checkpoint is None:
        raise UsageError("--steps sizes a window: give it with --from CHECKPOINT")
    plan = app.plan(flags)
    return plan, dataclasses.replace(request, ops=plan.settings.ops_steps if plan.settings.ops else None)


def _report(outcome: ReplayOutcome, markdown: str | None, as_json: bool) -> None:
    """The verdict as the options ask: Markdown to a file or stdout, JSON, or text and the next step."""
    verdict = outcome.verdict
    if markdown:
        ui.write_document(markdown, render.render_markdown(verdict))
    if as_json:
        ui.json_out(render.replay_dict(verdict, outcome.replay.id))
    elif markdown != options.STDOUT:
        ui.out(render.render_text(verdict, width=ui.line_width()))
        ui.info(
            f"replay recorded as {outcome.replay.id}; `repro diff {outcome.original.id} {outcome.replay.id}`"
        )
