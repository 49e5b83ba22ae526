"""The pictures `diff`, `check` and `replay` share: `--plot FILE` (both runs' metric curves) and
`--html FILE` (one self-contained page), written after the command's own result."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from repro import ui
from repro.compare.verdict import Verdict
from repro.diff import DiffResult
from repro.diff.metrics import Curves, curves
from repro.diff.proof import Proof
from repro.errors import UsageError
from repro.facts.determinism import ledger_text
from repro.store.record import Record
from repro.store.runs import LoadedRun, Store
from repro.ui import curves as curves_ui
from repro.ui import report as report_ui

if TYPE_CHECKING:
    from repro.check import CheckResult


def pair_curves(a: LoadedRun, b: LoadedRun) -> Curves:
    """Two loaded runs' curves, each read from its own store."""
    return curves(a.record, b.record, a.read_blob, b.read_blob)


def stored_curves(store: Store, a: Record, b: Record) -> Curves:
    """The curves of two runs recorded in ``store``, found by id in the store alone (an id from a
    capsule never names a file to open)."""
    return pair_curves(store.load_run(a.id), store.load_run(b.id))


def write_plot(found: Curves, path: Path) -> None:
    """Draw the curves to ``path`` and say where.

    Raises:
        UsageError: no matplotlib, another format than PNG/SVG, or no metric series.
    """
    ui.info(f"metric curves written to {curves_ui.plot(found, path)}")


def write_html(report: report_ui.Report, path: Path) -> None:
    """Write the page and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report_ui.render_html(report), encoding="utf-8")
    ui.info(f"HTML report written to {path}")


def diff_pictures(
    a: LoadedRun, b: LoadedRun, result: DiffResult, plot_path: Path | None, html_path: Path | None
) -> None:
    """`--plot` and `--html` of a diff: the page first, then the plot; a plot that cannot be drawn
    (no matplotlib, no metric series) is a warning, and the page says there are no curves."""
    if not (plot_path or html_path):
        return
    found = pair_curves(a, b)
    if html_path:
        write_html(report_ui.from_diff(result, found), html_path)
    if plot_path:
        _plot_or_warn(found, plot_path)


def _plot_or_warn(found: Curves | None, path: Path) -> None:
    try:
        if found is None:
            raise UsageError("the runs were not compared")
        write_plot(found, path)
    except UsageError as e:  # the result, already given, keeps its exit status
        ui.warn(f"no curves drawn to {path}: {e}" + (f" ({e.hint})" if e.hint else ""))


def verdict_pictures(
    store: Store,
    pair: tuple[Record, Record] | None,
    verdict: Verdict | None,
    title: str,
    paths: tuple[Path | None, Path | None],
    causes: Sequence[str] = (),
    proof: Proof | None = None,
    states: Sequence[tuple[str, str, str]] = (),
) -> None:
    """`--plot` and `--html` of a replay or a check: the pair of runs its verdict compared (``proof``:
    `check --against --prove`'s, shown above the likely causes; ``states``: `check --interrupt`'s
    per-rank state comparison of each resume). A plot that cannot be drawn (no
    matplotlib, no metric series) is a warning: the verdict keeps its exit."""
    plot_path, html_path = paths
    if not (plot_path or html_path):
        return
    found = stored_curves(store, *pair) if pair is not None else None
    if plot_path:
        _plot_or_warn(found, plot_path)
    if html_path:
        if verdict is None:
            report = report_ui.Report(title, "failed", "the runs were not compared", causes=list(causes))
        else:
            ops = [op for r in pair or () for op in r.determinism.nondeterministic_ops]
            report = report_ui.from_verdict(title, verdict, found, causes, ledger_text(ops) if ops else None)
        report.proved = report_ui.proved_lines(proof)
        report.states = list(states)
        write_html(report, html_path)


def check_pair(result: CheckResult) -> tuple[tuple[Record, Record] | None, Verdict | None]:
    """The runs a check's picture shows: run 1 and the first run that did not reproduce (else run 2)."""
    if not result.verdicts or len(result.records) < 2:
        return None, None
    index = next((i for i, v in enumerate(result.verdicts) if not v.reproduced), 0)
    other = result.records[min(index + 1, len(result.records) - 1)]
    return (result.records[0], other), result.verdicts[index]
