"""Rendering of a `Verdict`: text for people, JSON for programs, Markdown for CI summaries.

The text opens with the verdict and the one-line summary, so the answer is in the
first two lines; the reasons and the sections that differ follow. Lines stay within
100 columns. Colour goes through ``repro.ui.style``: on a terminal or with FORCE_COLOR,
never with NO_COLOR. Every line passes through ``repro.ui.printable``: paths, notes and log lines come from
records, and a record's control characters are shown, never obeyed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from repro import schemas
from repro.compare import ops as op_streams
from repro.compare.reasons import Code
from repro.compare.trace import describe as describe_trace
from repro.compare.verdict import MetricDivergence, OutputDiff, StdoutDivergence, TensorReport, Verdict
from repro.ui import escape, printable, style
from repro.units import plural, shorten

WIDTH = 100
MAX_TENSORS = 10  # differing tensors listed per output, largest difference first
MAX_OUTPUTS = 30  # changed outputs listed; the rest are counted

HEAD = {
    "identical": ("IDENTICAL", "green"),
    "within_tolerance": ("WITHIN TOLERANCE", "green"),
    "diverged": ("DIVERGED", "red"),
    "failed": ("FAILED", "red"),
}
MD_HEAD = {
    "identical": "✅ Reproduced: identical",
    "within_tolerance": "✅ Reproduced: within tolerance",
    "diverged": "❌ Not reproduced: diverged",
    "failed": "❌ Failed: the replay did not complete",
}
_MARK = {"changed": "~", "missing": "-", "added": "+", "same": "="}


# --------------------------------------------------------------------------- helpers


def _num(x: float | None) -> str:
    """A difference for people: 3 significant digits, exponent when small or large."""
    if x is None:
        return "—"
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    return f"{x:.3g}" if 1e-3 <= abs(x) < 1e5 else f"{x:.2e}"


def _val(v: Any) -> str:
    if v is None:
        return "(none)"
    return f"{v:.8g}" if isinstance(v, float) else str(v)


def _short_hash(h: str | None) -> str:
    return h[:12] if h else "—"


def _tolerance(v: Verdict) -> str:
    if v.tolerance is None:
        return f"{v.mode} mode, bit for bit"
    return f"{v.mode} mode, atol {v.tolerance.atol:g}, rtol {v.tolerance.rtol:g}"


def _where(m: MetricDivergence) -> str:
    return f"step {m.step}" if m.step is not None else f"value #{m.index + 1}"


def metric_text(m: MetricDivergence) -> str:
    """Where and how a metric series diverged, in one line."""
    at = _where(m)
    if m.kind == "value":
        return f"{m.name} at {at}: {_val(m.original)} → {_val(m.replay)} (abs {_num(m.abs_diff)})"
    if m.kind == "step":
        return f"{m.name} value #{m.index + 1} logged at step {m.original} vs {m.replay}"
    if m.kind == "missing":
        side = "original" if m.replay is None else "replay"
        return f"{m.name} is logged only in the {side} (from {at})"
    return f"{m.name} series lengths differ: {m.original_count} vs {m.replay_count} rows (from {at})"


def _worst_tensors(t: TensorReport) -> list[Any]:
    return sorted(t.differing, key=lambda d: -(math.inf if math.isnan(d.max_abs) else d.max_abs))


def _values_detail(o: OutputDiff) -> str:
    r = o.values
    assert r is not None
    if r.only_original or r.only_replay:
        return f"{len(r.only_original)} only in original, {len(r.only_replay)} only in replay"
    d = r.first
    if d is None:
        return o.note or "equal values"
    at = f" at step {d.step}" if d.step is not None else ""
    return f"{plural(r.differing, 'value')} differ, first {d.name}{at}: {_val(d.original)} → {_val(d.replay)}"


def output_detail(o: OutputDiff, verdict: Verdict | None = None) -> str:
    """How an output differs, in a few words (its path not included). Given the ``verdict``, an
    output several processes wrote at once is said to be so first: that, not its bytes, is why."""
    writers = _writers(verdict, o.path) if verdict is not None else None
    if writers is not None and o.status == "changed":
        return f"written by {writers} at once; {output_detail(o)}"
    if o.status == "missing":
        return "missing from the replay"
    if o.status == "added":
        return "only in the replay"
    if o.status == "same":
        return o.note or "same"
    if o.values is not None:
        return _values_detail(o)
    if o.kind == "link":
        return f"link target differs ({o.note})"
    t = o.tensors
    if t is None:
        return f"bytes differ ({o.note or 'not a tensor file'})"
    parts = []
    if t.differing:
        worst = _worst_tensors(t)[0]
        n = len(t.differing)
        verb = "tensor differs" if n == 1 else "tensors differ"
        parts.append(f"{n} {verb}, largest {worst.name} max abs {_num(worst.max_abs)}")
    if t.mismatched:
        parts.append(f"{len(t.mismatched)} shape/dtype/value mismatch{'es' * (len(t.mismatched) != 1)}")
    if t.only_original or t.only_replay:
        parts.append(f"{len(t.only_original)} only in original, {len(t.only_replay)} only in replay")
    return "; ".join(parts) or "bytes differ, every tensor equal"


# --------------------------------------------------------------------------- text


def _writers(verdict: Verdict, path: str) -> str | None:
    """``ranks 0 and 1``: the processes that wrote ``path`` at once, per the verdict's reasons."""
    for r in verdict.reasons:
        if r.code == Code.CONCURRENT_WRITE and r.path == path:
            return str(r.fields.get("writers") or "more than one process")
    return None


def render_text(
    verdict: Verdict, *, colour: bool = True, show_all: bool = False, width: int | None = WIDTH
) -> str:
    """The verdict for people: head, summary, reasons, then each part that differs; each line cut at
    ``width`` (a terminal's, `repro.ui.line_width`), never when ``width`` is None."""
    verdict = escape.scrub_terminal(verdict)
    paint = (lambda s, c: style(s, c)) if colour else (lambda s, c: s)
    label, hue = HEAD[verdict.status]
    pair = f"{verdict.original or 'original'} → {verdict.replay or 'replay'}"
    lines = [f"{paint(label, hue)}  {pair}  ({_tolerance(verdict)})", verdict.summary]
    if verdict.reasons and len(verdict.reasons) > 1:
        lines += ["", paint("Why", "bold")]
        lines += [f"  ✗ {r.message}" for r in verdict.reasons]
    lines += _outputs_text(verdict, paint, show_all)
    if verdict.metrics is not None:
        m = verdict.metrics
        ok = paint("within tolerance", "green") if m.within_tolerance else paint("diverged", "red")
        lines += ["", f"{paint('Metrics', 'bold')}  {ok}; {plural(m.differing, 'value')} differ"]
        lines.append(f"  {metric_text(m)}")
        if m.max_abs is not None:
            lines.append(f"  largest difference {_num(m.max_abs)}")
    if verdict.stdout is not None:
        lines += _stdout_text(verdict.stdout, paint)
    if verdict.trace is not None:
        t = verdict.trace
        ok = paint("within tolerance", "green") if t.within_tolerance else paint("diverged", "red")
        lines += ["", f"{paint('Trace', 'bold')}  {ok}", f"  {describe_trace(t)}"]
    lines += _ops_text(verdict, paint)
    if verdict.notes:
        lines += ["", paint("Notes", "bold")]
        lines += [f"  • {n}" for n in verdict.notes]
    return "\n".join(printable(shorten(line, width)) for line in lines)


def _ops_text(v: Verdict, paint: Any) -> list[str]:
    """The first differing op (``--ops``, reason code ``op_differs``) in full, or after a strict
    divergence the hint to look for it."""
    found = next((r for r in v.reasons if r.code == Code.OP_DIFFERS), None)
    if found is not None:
        f = found.fields
        if f.get("kind") != "value":
            return ["", paint("First differing op", "bold"), f"  {found.message}"]
        bwd = f"backward ({f.get('node')})" if f.get("phase") == "bwd" else "forward"
        cause = (
            "inputs identical: the op itself is nondeterministic (its kernel, the thread count, or a "
            "non-tensor argument such as a Python number)"
            if f.get("inputs_same")
            else "inputs already different: the data, or an earlier value outside the tensors"
        )
        return [
            "", paint("First differing op", "bold"),
            f"  {f.get('op')} (#{f.get('index')}), {bwd}, in {f.get('module') or 'no module'}",
            f"  at {f.get('where') or '?'}, optimizer step {f.get('step')}, rank {f.get('rank')}",
            f"  {f.get('size')}", f"  {cause}",
        ]  # fmt: skip
    if op_streams.would_help(v):
        return ["", paint("Next", "bold"), "  re-run with --ops to find the first differing operation"]
    return []


def _outputs_text(v: Verdict, paint: Any, show_all: bool) -> list[str]:
    counts: dict[str, int] = {}
    for o in v.outputs:
        counts[o.status] = counts.get(o.status, 0) + 1
    if not v.outputs:
        return ["", f"{paint('Outputs', 'bold')}  none recorded"]
    tally = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    lines = ["", f"{paint('Outputs', 'bold')}  {len(v.outputs)} compared: {tally}"]
    # outputs the same by content though their bytes differ (a PDF's date) are shown with the format
    shown = v.outputs if show_all else [o for o in v.outputs if o.status != "same" or o.stamped]
    width = min(40, max((len(o.path) for o in shown), default=0))
    for o in shown[:MAX_OUTPUTS]:
        colour = "green" if o.within_tolerance else "red"
        mark = paint(_MARK[o.status], colour)
        detail = output_detail(o, v)
        if o.status == "changed" and o.tensors is None:
            detail += f"  {_short_hash(o.original_hash)} → {_short_hash(o.replay_hash)}"
        lines.append(f"  {mark} {o.path:<{width}}  {detail}")
        if o.tensors is not None:
            lines += _tensor_lines(o.tensors, paint)
    if len(shown) > MAX_OUTPUTS:
        lines.append(f"  … and {len(shown) - MAX_OUTPUTS} more")
    return lines


def _tensor_lines(t: TensorReport, paint: Any) -> list[str]:
    rows = []
    for d in _worst_tensors(t)[:MAX_TENSORS]:
        flag = paint("ok", "green") if d.within_tolerance else paint("over", "red")
        shape = "[" + ", ".join(str(s) for s in d.shape) + "]"
        rows.append(
            f"      {d.name:<36} {shape:<14} {d.dtype:<9} {_num(d.max_abs):>9} {_num(d.max_rel):>9}  {flag}"
        )
    lines = []
    if rows:
        lines.append(f"      {'tensor':<36} {'shape':<14} {'dtype':<9} {'max abs':>9} {'max rel':>9}")
        lines += rows
        if len(t.differing) > MAX_TENSORS:
            lines.append(f"      … and {len(t.differing) - MAX_TENSORS} more differing tensors")
    for m in t.mismatched[:MAX_TENSORS]:
        lines.append(f"      {m.name}: {m.reason} {m.original} → {m.replay}")
    for label, names in (("only in original", t.only_original), ("only in replay", t.only_replay)):
        if names:
            more = f" (+{len(names) - 5} more)" if len(names) > 5 else ""
            lines.append(f"      {label}: {', '.join(names[:5])}{more}")
    return lines


def _stdout_text(s: StdoutDivergence, paint: Any) -> list[str]:
    ok = paint("within tolerance", "green") if s.within_tolerance else paint("differs", "red")
    head = f"{paint('Stdout', 'bold')}  {ok} from line {s.line}; {plural(s.differing, 'line')} differ"
    lines = ["", head]
    lines.append(paint("  - ", "red") + (s.original if s.original is not None else "(no line)"))
    lines.append(paint("  + ", "green") + (s.replay if s.replay is not None else "(no line)"))
    if s.original_value is not None:
        name = f"{s.field} " if s.field else ""
        lines.append(f"  first value that differs: {name}{s.original_value} → {s.replay_value}")
    return lines


# --------------------------------------------------------------------------- JSON


def render_json(verdict: Verdict) -> dict[str, Any]:
    """The verdict as a JSON-able dict (``json.dumps`` works with ``allow_nan=False``)."""
    return verdict.to_dict()


def replay_dict(verdict: Verdict, replay_id: str) -> dict[str, Any]:
    """`repro replay --json` (schemas/replay.json): the verdict and the id the replay is recorded as."""
    return schemas.answer("replay", render_json(verdict) | {"replay_id": replay_id})


# --------------------------------------------------------------------------- Markdown


def md_cell(text: Any) -> str:
    """A Markdown table cell or line of text (`escape.markdown`): no tag, link or control survives."""
    return escape.markdown(text)


def md_code(text: Any) -> str:
    return escape.markdown_code(text)


def md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render_markdown(verdict: Verdict, *, level: int = 3) -> str:
    """The verdict as Markdown for a PR comment or a CI job summary: a checks table, then details."""
    h = "#" * level
    lines = [f"{h} {MD_HEAD[verdict.status]}", ""]
    pair = f"{md_code(verdict.original or 'original')} → {md_code(verdict.replay or 'replay')}"
    lines.append(f"{pair} · {_tolerance(verdict)}")
    lines += ["", f"> {md_cell(verdict.summary)}", ""]
    lines += [md_row(["", "check", "result", "detail"]), md_row(["---"] * 4)]
    lines += [md_row(r) for r in _md_checks(verdict)]
    changed = [o for o in verdict.outputs if o.status != "same"]
    if changed:
        lines += ["", f"{h}# Outputs that differ", ""]
        lines += [
            md_row(["output", "status", "tensor", "shape", "dtype", "max abs", "max rel", ""]),
            md_row(["---"] * 8),
        ]
        for o in changed[:MAX_OUTPUTS]:
            lines += _md_output_rows(o)
        if len(changed) > MAX_OUTPUTS:
            lines.append(f"\n… and {len(changed) - MAX_OUTPUTS} more")
    if verdict.stdout is not None:
        s = verdict.stdout
        lines += ["", f"{h}# Stdout, line {s.line}", ""]
        lines += escape.markdown_fence(
            [
                f"- {s.original if s.original is not None else '(no line)'}",
                f"+ {s.replay if s.replay is not None else '(no line)'}",
            ],
            "diff",
        )
    if verdict.notes:
        lines += ["", f"{h}# Notes", ""]
        lines += [f"- {md_cell(n)}" for n in verdict.notes]
    return "\n".join(printable(line) for line in lines) + "\n"


def _mark(ok: bool) -> str:
    return "✅" if ok else "❌"


def _md_checks(v: Verdict) -> list[list[str]]:
    rows = []
    if v.status == "failed":
        rows.append([_mark(False), "run", "failed", md_cell(v.reasons[0].message if v.reasons else "")])
    n, changed = len(v.outputs), v.changed_outputs
    if not changed:
        rows.append([_mark(True), "outputs", f"{n} identical", ""])
    else:
        ok = all(o.within_tolerance for o in changed) and v.mode != "strict"
        first = changed[0]
        detail = f"{md_code(first.path)} {md_cell(output_detail(first, v))}"
        if len(changed) > 1:
            detail += f" (+{len(changed) - 1} more)"
        result = "within tolerance" if ok else "diverged"
        rows.append([_mark(ok), "outputs", f"{len(changed)} of {n} differ, {result}", detail])
    m = v.metrics
    if m is None:
        rows.append([_mark(True), "metrics", "equal", ""])
    else:
        ok = m.within_tolerance and v.mode != "strict"
        rows.append([_mark(ok), "metrics", "within tolerance" if ok else "diverged", md_cell(metric_text(m))])
    s = v.stdout
    if s is None:
        rows.append([_mark(True), "stdout", "equal", ""])
    else:
        ok = s.within_tolerance and v.mode != "strict"
        detail = f"from line {s.line}"
        if s.original_value is not None:
            detail += f": {s.field + ' ' if s.field else ''}{s.original_value} → {s.replay_value}"
        rows.append([_mark(ok), "stdout", "within tolerance" if ok else "differs", md_cell(detail)])
    order = [r for r in v.reasons if r.code in (Code.DATA_ORDER_DIFFERS, Code.WORKER_SEEDS_DIFFER)]
    if order:
        rows.append([_mark(False), "data order", "differs", md_cell(order[0].message)])
    t = v.trace
    if t is not None:
        ok = t.within_tolerance and v.mode != "strict"
        rows.append(
            [_mark(ok), "trace", "within tolerance" if ok else "diverged", md_cell(describe_trace(t))]
        )
    return rows


def _md_output_rows(o: OutputDiff) -> list[str]:
    t = o.tensors
    path = md_code(o.path)
    if t is None:
        return [md_row([path, o.status, "", "", "", "", "", md_cell(output_detail(o))])]
    rows = []
    for d in _worst_tensors(t)[:MAX_TENSORS]:
        shape = "[" + ", ".join(str(s) for s in d.shape) + "]"
        rows.append(
            md_row(
                [
                    path,
                    o.status,
                    md_code(d.name),
                    shape,
                    md_cell(d.dtype),
                    _num(d.max_abs),
                    _num(d.max_rel),
                    _mark(d.within_tolerance),
                ]
            )
        )
    for m in t.mismatched[:MAX_TENSORS]:
        rows.append(
            md_row(
                [
                    path,
                    o.status,
                    md_code(m.name),
                    "",
                    "",
                    "",
                    "",
                    md_cell(f"{m.reason}: {m.original} → {m.replay}"),
                ]
            )
        )
    for label, names in (("only in original", t.only_original), ("only in replay", t.only_replay)):
        for name in names[:MAX_TENSORS]:
            rows.append(md_row([path, o.status, md_code(name), "", "", "", "", label]))
    return rows or [md_row([path, o.status, "", "", "", "0", "0", "bytes differ, every tensor equal"])]
