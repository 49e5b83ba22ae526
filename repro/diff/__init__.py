"""Capsule vs capsule: what differs between two runs, and which difference most likely matters.

`diff_records` compares two `Record`s section by section and returns a `DiffResult`
(pure data). Nothing here prints, reads the store or imports click; `repro.ui.diff`
renders the result as text, Markdown or JSON. The JSON layout is documented in
``docs/diff.md`` and versioned by `DIFF_FORMAT`.

The package, by job: ``model`` (the result dataclasses), ``input_sections``,
``environment_sections``, ``setting_sections`` and ``output_sections`` (one function per
section), ``causes`` (the ranking of likely causes), ``files`` and ``patches`` (file
lists and unified diffs), ``versions`` (package pins), ``metrics`` (metric series),
``changes`` and ``reader`` (shared building blocks). The public names are re-exported
here.
"""

from __future__ import annotations

from repro.compare import dataorder
from repro.compare.verdict import CompareOptions
from repro.diff import results
from repro.diff.causes import (
    RANK_CODE,
    RANK_DATA,
    RANK_DEPS,
    RANK_DETERMINISM,
    RANK_HARDWARE,
    RANK_HARDWARE_STRICT,
    RANK_IMAGE,
    RANK_NONDETERMINISM,
    RANK_PARAMS,
    RANK_SEEDS,
    RANK_SOFTWARE,
    RANK_WORLD,
    rank_causes,
)
from repro.diff.environment_sections import diff_deps, diff_env
from repro.diff.files import MAX_GROUPS, group_by_dir
from repro.diff.input_sections import diff_code, diff_command, diff_data
from repro.diff.metrics import divergences, first_divergence, metric_rows, series
from repro.diff.model import (
    DIFF_FORMAT,
    SECTIONS,
    Cause,
    Change,
    DiffResult,
    DirGroup,
    Divergence,
    ResultDifference,
    RunSummary,
    Section,
)
from repro.diff.output_sections import diff_metrics, diff_outputs
from repro.diff.patches import reverse_patch, split_patch
from repro.diff.reader import OpenBlob, ReadBlob, SafeReader
from repro.diff.setting_sections import diff_determinism, diff_seeds
from repro.diff.versions import canonical_name, compare_versions, parse_pins
from repro.store.record import Record
from repro.units import human_bytes, plural

__all__ = [
    "Cause",
    "Change",
    "DIFF_FORMAT",
    "DiffResult",
    "DirGroup",
    "Divergence",
    "MAX_GROUPS",
    "RANK_CODE",
    "RANK_DATA",
    "RANK_DEPS",
    "RANK_DETERMINISM",
    "RANK_HARDWARE",
    "RANK_HARDWARE_STRICT",
    "RANK_IMAGE",
    "RANK_NONDETERMINISM",
    "RANK_PARAMS",
    "RANK_SEEDS",
    "RANK_SOFTWARE",
    "RANK_WORLD",
    "OpenBlob",
    "ReadBlob",
    "ResultDifference",
    "RunSummary",
    "SECTIONS",
    "Section",
    "canonical_name",
    "compare_versions",
    "diff_records",
    "divergences",
    "first_divergence",
    "group_by_dir",
    "human_bytes",
    "metric_rows",
    "parse_pins",
    "plural",
    "rank_causes",
    "reverse_patch",
    "series",
    "split_patch",
]


def diff_records(
    a: Record,
    b: Record,
    read_blob: ReadBlob,
    *,
    code: bool = False,
    open_blob: OpenBlob | None = None,
    options: CompareOptions | None = None,
) -> DiffResult:
    """Compare run A with run B; ``code=True`` adds the unified diff of changed source files.

    ``open_blob`` gives a stored blob's file, so that outputs compare by content where
    repro knows the format (TensorBoard events, metric files); without it, by hash.
    The results are what a replay compares (`repro.diff.results`): outputs, metric series,
    stdout by meaning, the exit status. Only when all of it is equal are the results
    identical; then no likely cause is ranked and the differences are listed in
    ``without_effect`` instead. ``options`` is repro.yaml's ``compare:`` section.
    """
    reader = SafeReader(read_blob)
    side_a, side_b = (results.without_outputs(results.side_of(r, read_blob, open_blob)) for r in (a, b))
    verdict = results.compare_results(side_a, side_b, options)
    sections = [
        _section("command", diff_command(a, b, reader)),
        _section("code", diff_code(a, b, reader, with_patch=code)),
        _section("data", diff_data(a, b, reader)),
        _section("dependencies", diff_deps(a, b, reader)),
        _section("seeds", diff_seeds(a, b)),
        _section("determinism", diff_determinism(a, b)),
        _section("environment", diff_env(a, b)),
        _section("metrics", diff_metrics(a, b, reader)),
        _section("outputs", diff_outputs(a, b, open_blob)),
        _section("stdout", results.stdout_section(verdict)),
    ]
    by_name = {s.name: s for s in sections}
    found = results.differences(verdict, by_name["outputs"])
    results_differ = bool(found) or any(by_name[n].differs for n in ("metrics", "outputs", "stdout"))
    order = dataorder.compare(
        dataorder.read(a.results.logs, reader), dataorder.read(b.results.logs, reader)
    )  # the samples each DataLoader yielded, when both runs recorded them
    causes = rank_causes(by_name, a, b, results_differ, order)
    return DiffResult(
        a=_summary(a),
        b=_summary(b),
        sections=sections,
        likely_causes=causes if results_differ else [],
        results_differ=results_differ,
        without_effect=[] if results_differ else causes,
        results=found,
    )


def _summary(r: Record) -> RunSummary:
    return RunSummary(
        id=r.id,
        created=r.created,
        status=r.results.status,
        mode=r.determinism.mode,
        final_metrics=dict(r.results.final_metrics),
    )


def _section(name: str, body: Section) -> Section:
    seen: set[tuple[str, str]] = set()
    unique = []
    for c in body.changes:  # one row per item, even where two records hold the same fact
        if (c.key, c.scope) not in seen:
            seen.add((c.key, c.scope))
            unique.append(c)
    body.changes = unique
    body.name = name
    body.title = dict(SECTIONS)[name]
    return body
