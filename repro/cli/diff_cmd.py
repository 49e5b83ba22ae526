"""`repro diff`: what differs between two runs and which difference most likely matters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from repro import ui
from repro.cli import figures, options, prove_options
from repro.cli.completion import complete_ref
from repro.compare.verdict import CompareOptions
from repro.diff import diff_records
from repro.ui import diff as diff_ui


def _either_blob(first: Any, second: Any) -> Any:
    """A blob reader that looks in run A's store first, then run B's."""

    def read(digest: str) -> bytes | None:
        data: bytes | None = first.read_blob(digest)
        return data if data is not None else second.read_blob(digest)

    return read


def _either_path(first: Any, second: Any) -> Any:
    """A blob's file in run A's store, else in run B's; None when neither kept it."""

    def open_blob(digest: str) -> Path | None:
        for run in (first, second):
            path: Path = run.blob_path(digest)
            if path.is_file():
                return path
        return None

    return open_blob


@click.command("diff")
@click.argument("run_a", metavar="RUN_A", shell_complete=complete_ref)
@click.argument("run_b", metavar="RUN_B", shell_complete=complete_ref)
@options.json_option("The result as JSON (docs/diff.md, schemas/diff.json).")
@options.markdown_option("the tables")
@click.option("--code", is_flag=True, help="Include the unified diff of changed source files.")
@options.plot_option("both runs'")
@options.html_option("the diff")
@click.option(
    "--exit-code", is_flag=True, help="Exit 1 when the runs differ, 0 when not, as `git diff --exit-code`."
)
@click.option("--all", "show_all", is_flag=True, help="Also show sections without differences.")
@prove_options.prove_options("RUN_A with differences taken from RUN_B")
@click.pass_context
def diff(
    ctx: click.Context,
    run_a: str,
    run_b: str,
    as_json: bool,
    markdown: str | None,
    code: bool,
    plot_path: Path | None,
    html_path: Path | None,
    exit_code: bool,
    show_all: bool,
    prove: bool,
    budget: int | None,
    prove_steps: int | None,
) -> None:
    """Show what differs between RUN_A and RUN_B, and the likely causes, ranked.

    Sections: command and hyper-parameters, code, data, dependencies, seeds,
    determinism, environment and hardware, metrics, outputs, stdout. The results are what
    a replay compares (outputs, metric series, stdout by meaning, the exit status): "results
    identical" only when all of it is equal. Refs are run ids, unique prefixes, latest,
    latest~N, run directories or capsule files.

    \b
    repro diff latest~1 latest
    repro diff leslie.tar latest --code
    repro diff A B --json | jq '.likely_causes[0].reason'
    repro diff A B --markdown comment.md        (--markdown - or alone: on stdout)
    repro diff A B --plot curves.png --html report.html
    repro diff A B --prove --budget 6           (prove which differences change the result)
    repro diff A B --prove --steps 20           (experiments: 20 steps from a shared checkpoint)
    """
    options.output_forms(as_json, markdown)
    prove_options.check_budget(prove, budget, prove_steps)
    store = ctx.obj.store
    a = store.resolve(run_a)
    b = store.resolve(run_b)
    read = _either_blob(a, b)
    compared = CompareOptions.from_settings(ctx.obj.settings)  # stdout as a replay compares it
    result = diff_records(a.record, b.record, read, code=code, open_blob=_either_path(a, b), options=compared)
    if prove:
        from repro.cli.events import on_event
        from repro.prove import prove as run_proof

        result.proof = run_proof(result, a, b, store, ctx.obj.plan(), on_event, budget, prove_steps)
    figures.diff_pictures(a, b, result, plot_path, html_path)
    if markdown:
        ui.write_document(markdown, diff_ui.render_markdown(result, show_all=show_all))
    if as_json:
        ui.json_out(diff_ui.render_json(result))
    elif markdown != options.STDOUT:
        colour, width = diff_ui.colour_wanted(), ui.line_width()
        ui.out(diff_ui.render_text(result, colour=colour, show_all=show_all, width=width))
    if exit_code and result.differs:
        ctx.exit(1)
