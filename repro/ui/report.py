"""One self-contained HTML page for CI (`--html FILE` on check, replay and diff): the verdict, the
likely causes, the metric curves as inline SVG, the outputs table and the first difference. No
script, no external asset, nothing fetched: a page an artifact viewer opens offline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from repro.compare.reasons import Code
from repro.compare.verdict import Verdict
from repro.diff import DiffResult
from repro.diff.metrics import Curves
from repro.diff.proof import Proof
from repro.ui import curves as curves_ui
from repro.ui import escape
from repro.ui import proof as proof_ui
from repro.ui.verdict import output_detail

MAX_PANELS = 24
_GOOD = ("identical", "within_tolerance", "same", "reproduced")


@dataclass
class Report:
    """What the page shows, filled from a verdict or a diff."""

    title: str
    status: str  # identical | within_tolerance | diverged | failed | differs | same
    summary: str
    causes: list[str] = field(default_factory=list)
    first: list[tuple[str, str]] = field(default_factory=list)  # (what, where): first differing tensor …
    outputs: list[tuple[str, str, str]] = field(default_factory=list)  # (path, status, detail)
    curves: Curves | None = None
    notes: list[str] = field(default_factory=list)
    proved: list[str] = field(default_factory=list)  # `--prove`: the headline, then one line per factor
    states: list[tuple[str, str, str]] = field(default_factory=list)  # (resumed run, control, rank's state)


def from_verdict(
    title: str, verdict: Verdict, curves: Curves | None, causes: Sequence[str] = (), ops: str | None = None
) -> Report:
    """A replay's or a check's verdict as a page (``causes``: a diff's likely causes, where one was made;
    ``ops``: the nondeterministic ops the runs used, shown when the result did not come back)."""
    first = []
    if (t := verdict.trace) is not None:
        first.append(("first differing parameter", f"{t.param} at optimizer step {t.step}"))
    for reason in verdict.reasons:
        if reason.code == Code.TENSOR_DIFFERS:
            first.append(("first differing tensor", f"{reason.fields.get('tensor')} in {reason.path}"))
            break
    if verdict.metrics is not None:
        m = verdict.metrics
        first.append(("first differing metric", f"{m.name} at step {m.step}: {m.original} → {m.replay}"))
    if ops and not verdict.reproduced:
        first.append(("nondeterministic ops that ran", ops))
    outputs: list[tuple[str, str, str]] = [
        (o.path, o.status, output_detail(o, verdict)) for o in verdict.outputs
    ]
    return Report(
        title=title,
        status=verdict.status,
        summary=verdict.summary,
        causes=list(causes) or [r.message for r in verdict.reasons],
        first=first,
        outputs=outputs,
        curves=curves,
        notes=list(verdict.notes),
    )


def from_diff(result: DiffResult, curves: Curves | None) -> Report:
    """A diff as a page: its likely causes, each section's summary, the outputs that differ."""
    outputs = result.section("outputs")
    rows = [(c.key, c.kind, c.detail or "") for c in outputs.changes if c.scope == "file"]
    metrics = result.section("metrics")
    first = [("first divergence", f"{d.metric} at step {d.step:g}")] if (d := metrics.divergence) else []
    summary = "; ".join(f"{s.title}: {s.summary}" for s in result.sections if s.differs and s.summary)
    return Report(
        title=f"repro diff {result.a.id} {result.b.id}",
        status="differs" if result.results_differ else "same",
        summary=summary or "no recorded differences",
        causes=[c.reason for c in result.likely_causes] or [c.reason for c in result.without_effect],
        first=first,
        outputs=rows,
        curves=curves,
        proved=proved_lines(result.proof),
    )


def proved_lines(proof: Proof | None) -> list[str]:
    """A proof as the page shows it: its headline, how the experiments ran, then one line per factor."""
    if proof is None:
        return []
    lines = [proof_ui.headline(proof)]
    if proof.window is not None:
        lines.append(proof_ui.window_phrase(proof.window))
    return lines + [f"{f.factor.id}: {proof_ui.effect_phrase(f)}" for f in proof.findings]


_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:20px;margin:0 0 8px} h2{font-size:16px;margin:24px 0 8px}
.status{display:inline-block;padding:2px 10px;border-radius:4px;color:#fff;font-weight:bold}
.good{background:#2e7d32} .bad{background:#c62828}
table{border-collapse:collapse;font-size:13px} td,th{border:1px solid #ddd;padding:4px 8px;text-align:left}
code{font-family:ui-monospace,monospace;font-size:12px}
.panels{display:flex;flex-wrap:wrap;gap:12px} .panels svg{border:1px solid #eee;background:#fff}
.legend span{margin-right:16px;font-size:13px}
"""


def render_html(report: Report) -> str:
    """The page: verdict, causes, first difference, curves, outputs, notes."""
    e = escape.html
    good = report.status in _GOOD
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(report.title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{e(report.title)}</h1>",
        f'<p><span class="status {"good" if good else "bad"}" id="verdict">{e(report.status)}</span> '
        f"{e(report.summary)}</p>",
    ]
    if report.proved:  # proved causes above the likely ones
        items = "".join(f"<li>{e(c)}</li>" for c in report.proved[1:])
        parts.append(f'<h2>Proved causes</h2><p id="proved">{e(report.proved[0])}</p><ul>{items}</ul>')
    if report.causes:
        items = "".join(f"<li>{e(c)}</li>" for c in report.causes)
        parts.append(f"<h2>Likely causes</h2><ol>{items}</ol>")
    if report.first:
        rows = "".join(f"<tr><th>{e(k)}</th><td><code>{e(v)}</code></td></tr>" for k, v in report.first)
        parts.append(f"<h2>First difference</h2><table>{rows}</table>")
    if report.states:
        cells = ((f"<code>{e(r)}</code>", e(c), e(t)) for r, c, t in report.states)
        rows = "".join(f"<tr><td>{r}</td><td>{c}</td><td>{t}</td></tr>" for r, c, t in cells)
        head = "<tr><th>resumed run</th><th>control</th><th>state at the resume point, per rank</th></tr>"
        parts.append(f'<h2>Resume state, per rank</h2><table id="states">{head}{rows}</table>')
    parts += _curves_html(report.curves)
    if report.outputs:
        cells = ((f"<code>{e(p)}</code>", e(s), e(d)) for p, s, d in report.outputs)
        rows = "".join(f"<tr><td>{p}</td><td>{s}</td><td>{d}</td></tr>" for p, s, d in cells)
        parts.append(
            f"<h2>Outputs</h2><table><tr><th>path</th><th>status</th><th>detail</th></tr>{rows}</table>"
        )
    if report.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in report.notes) + "</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _curves_html(curves: Curves | None) -> list[str]:
    if curves is None:
        return []
    if not curves.names:
        return ["<h2>Metric curves</h2><p>no curves: neither run has a metric series</p>"]
    a, b = curves.labels
    legend = (
        f'<p class="legend"><span style="color:{curves_ui.A_COLOUR}">━ {escape.html(a)}</span>'
        f'<span style="color:{curves_ui.B_COLOUR}">╌ {escape.html(b)}</span>'
        f'<span style="color:{curves_ui.MARK_COLOUR}">│ first divergence</span></p>'
    )
    names = curves.names[:MAX_PANELS]
    panels = "".join(curves_ui.panel_svg(curves, name) for name in names)
    more = len(curves.names) - len(names)
    tail = f"<p>… and {more} more metrics (repro diff --plot draws them all)</p>" if more > 0 else ""
    return [f'<h2>Metric curves</h2>{legend}<div class="panels">{panels}</div>{tail}']
