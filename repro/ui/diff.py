"""Rendering of a `DiffResult`: text for people, Markdown for PR comments, JSON for programs, plots.

The text starts with the answer: identical results and what changed without effect on
them, or the ranked likely causes of the difference; sections follow. Lines stay within
100 columns (patches excepted), coloured only when asked (the CLI asks when stdout wants
colour: `repro.ui.colour_on`). Every line passes through ``repro.ui.printable``: keys, values
and patches come from records, and a record's control characters are shown, never obeyed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from repro.diff import Change, DiffResult, DirGroup, Section, human_bytes
from repro.diff.metrics import curves_of_rows
from repro.diff.model import TensorFileChange
from repro.ui import colour_on, escape, printable
from repro.ui import curves as curves_ui
from repro.ui import proof as proof_ui
from repro.units import shorten

WIDTH = 100
MAX_LISTED = 20  # file changes listed one per line; above this, a per-directory summary

_ANSI = {"red": "31", "green": "32", "yellow": "33", "cyan": "36", "dim": "2", "bold": "1"}
_MARK = {"added": "+", "removed": "-", "changed": "~", "upgraded": "↑", "downgraded": "↓"}
_MARK_COLOUR = {
    "added": "green",
    "removed": "red",
    "changed": "yellow",
    "upgraded": "cyan",
    "downgraded": "cyan",
}
_FILE_SCOPES = ("file", "untracked", "left", "patch", "config")
_SIZED = ("file", "untracked", "left", "config")  # file changes shown by size


def colour_wanted() -> bool:
    """Whether stdout wants colour (a terminal, or FORCE_COLOR; never with NO_COLOR)."""
    return colour_on(sys.stdout)


class _Painter:
    """Colours (when ``on``) and the width lines are cut at (a terminal's; None: never cut)."""

    def __init__(self, on: bool, width: int | None = WIDTH) -> None:
        self.on = on
        self.width = width
        self.limit = 40 if width is not None else None  # a value in a table row

    def __call__(self, text: str, colour: str) -> str:
        return f"\033[{_ANSI[colour]}m{text}\033[0m" if self.on and text else text

    def fit(self, text: str) -> str:
        return shorten(text, self.width)


def _value(value: Any, limit: int | None = 40) -> str:
    if value is None:
        text = "—"
    elif isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, list | dict):
        text = json.dumps(value, default=str)
    else:
        text = str(value)
    return shorten(text, limit)


def _bytes_delta(n: int) -> str:
    return ("+" if n >= 0 else "−") + human_bytes(abs(n))


# --------------------------------------------------------------------------- text


def render_text(
    result: DiffResult, *, colour: bool = False, show_all: bool = False, width: int | None = WIDTH
) -> str:
    """The diff as text: likely causes first, then each section that differs (all with show_all);
    lines cut at ``width`` (a terminal's, `repro.ui.line_width`), never when ``width`` is None."""
    result = escape.scrub_terminal(result)
    p = _Painter(colour, width)
    a, b = result.a.id, result.b.id
    if not result.differs:
        lines = [f"No recorded differences between {a} and {b}."]
        if not show_all:
            return "\n".join(printable(line) for line in lines)
    elif not result.results_differ:
        n = sum(1 for s in result.sections if s.differs)
        head = f"{a} → {b}: results identical; {n} of {len(result.sections)} sections differ"
        lines = [p(p.fit(head), "bold"), "  changed without effect on results:"]
        lines += [p.fit(f"  - {cause.reason}") for cause in result.without_effect]
    else:
        n = sum(1 for s in result.sections if s.differs)
        head = p.fit(f"{a} → {b}: {n} of {len(result.sections)} sections differ; likely causes:")
        lines = [p(head, "bold")]
        for i, cause in enumerate(result.likely_causes, 1):
            lines.append(p.fit(f"  {i}. {cause.reason}"))
        lines.append(p.fit(_results_line(result)))
    if result.proof is not None:  # proved causes above the likely ones
        proved = proof_ui.text_lines(result.proof)
        lines = [p(p.fit(proved[0]), "bold"), *(p.fit(line) for line in proved[1:]), "", *lines]
    for section in result.sections:
        if section.differs or show_all:
            lines.append("")
            lines.extend(_section_text(section, p))
    return "\n".join(printable(line) for line in lines)


def _results_line(result: DiffResult) -> str:
    if not result.results_differ:
        return "  results: identical outputs, metrics, stdout and exit status"
    parts = [result.section(n).summary for n in ("metrics", "outputs", "stdout") if result.section(n).differs]
    parts = [p for p in parts if p] or [r.message for r in result.results[:1]]
    return "  results differ: " + "; ".join(parts)


def _section_text(section: Section, p: _Painter) -> list[str]:
    title = p(section.title, "bold")
    if not section.differs:
        return [f"{title} — same"]
    head = f"{section.title} — {section.summary}" if section.summary else section.title
    lines = [p(p.fit(head), "bold")]
    files = [c for c in section.changes if c.scope in _FILE_SCOPES]
    lines += _change_lines([c for c in section.changes if c.scope not in _FILE_SCOPES], p)
    if len(files) > MAX_LISTED and section.groups:
        lines += _group_lines(section.groups, len(files), p)
    else:
        lines += _change_lines(files, p)
    if section.divergence is not None:
        d = section.divergence
        cut = p.limit and 24
        text = f"  first divergence: {d.metric} at step {d.step}: {_value(d.a, cut)} → {_value(d.b, cut)}"
        lines.append(p.fit(text))
    for note in section.notes:
        lines.append(p(p.fit(f"  note: {note}"), "dim"))
    if section.patch:
        lines.append("")
        lines += [_patch_line(line, p) for line in section.patch.splitlines()]
    return lines


def _change_lines(changes: list[Change], p: _Painter) -> list[str]:
    if not changes:
        return []
    width = min(36, max(len(c.key) for c in changes))
    out = []
    for c in changes:
        mark = p(_MARK.get(c.kind, "~"), _MARK_COLOUR.get(c.kind, "yellow"))
        key = c.key if len(c.key) <= width or p.width is None else "…" + c.key[-(width - 1) :]
        text = _change_text(c, p.limit)
        line = f"  {_MARK.get(c.kind, '~')} {key.ljust(width)}  {text}"
        line = p.fit(line)
        out.append(f"  {mark}" + line[3:])
        if c.tensors is not None:
            out += _tensor_lines(c.tensors, p)
    return out


MAX_TENSORS = 10  # tensors listed under a changed tensor file (--json lists them all)


def _tensor_lines(t: TensorFileChange, p: _Painter) -> list[str]:
    """The tensors of a changed file that differ, largest difference first."""
    shown = t.differing[:MAX_TENSORS]
    width = min(36, max((len(x.name) for x in shown), default=0))
    out = []
    for x in shown:
        if x.max_abs is not None:
            how = f"max abs {x.max_abs:.3g}, max rel {x.max_rel:.3g}"
        elif x.a is not None or x.b is not None:
            how = f"{x.kind} {x.a} → {x.b}"
        else:
            how = "only in A" if x.kind == "only_a" else "only in B"
        out.append(p.fit(f"        {x.name.ljust(width)}  {how}"))
    if len(t.differing) > MAX_TENSORS:
        out.append(f"        … {len(t.differing) - MAX_TENSORS} more differ")
    return out


def _change_text(c: Change, limit: int | None = 40) -> str:
    if c.scope in _SIZED and c.lines is None and isinstance(c.old or c.new, int):
        note = f" ({c.detail})" if c.detail and c.scope == "left" else ""
        if c.kind == "added":
            return human_bytes(int(c.new or 0)) + note
        if c.kind == "removed":
            return human_bytes(int(c.old or 0)) + note
        return f"{human_bytes(int(c.old or 0))} → {human_bytes(int(c.new or 0))}" + (
            f" ({c.detail})" if c.detail else ""
        )
    if c.lines is not None or c.scope == "patch":
        return c.detail or ""
    if c.kind == "added":
        text = _value(c.new, limit) if c.new is not None else "added"
    elif c.kind == "removed":
        text = (_value(c.old, limit) + " (removed)") if c.old is not None else "removed"
    elif c.old is None and c.new is None:
        return c.detail or "changed"
    else:
        text = f"{_value(c.old, limit)} → {_value(c.new, limit)}"
    if c.scope == "final" and c.delta is not None:
        text += f"   ({'+' if c.delta >= 0 else '−'}{abs(c.delta):.4g})"
    if c.scope == "installed":
        text += "   (installed)"
    if c.detail:
        text += f"   ({c.detail})"
    return text


def _group_lines(groups: list[DirGroup], total: int, p: _Painter) -> list[str]:
    width = min(40, max(len(g.dir) for g in groups))
    out = [p(f"  {total} files in {len(groups)} directories (--json lists every file):", "dim")]
    for g in groups:
        counts = []
        if g.added:
            counts.append(p(f"+{g.added}", "green"))
        if g.removed:
            counts.append(p(f"-{g.removed}", "red"))
        if g.changed:
            counts.append(p(f"~{g.changed}", "yellow"))
        name = g.dir if len(g.dir) <= width else "…" + g.dir[-(width - 1) :]
        out.append(f"    {name.ljust(width)}  {' '.join(counts)}  ({_bytes_delta(g.bytes_delta)})")
    return out


def _patch_line(line: str, p: _Painter) -> str:
    if line.startswith(("+++", "---")):
        return p(line, "bold")
    if line.startswith("+"):
        return p(line, "green")
    if line.startswith("-"):
        return p(line, "red")
    if line.startswith("@@"):
        return p(line, "cyan")
    return line


# --------------------------------------------------------------------------- markdown


def _md(text: Any) -> str:
    return escape.markdown(_value(text, None))


def _md_code(text: Any) -> str:
    return escape.markdown_code(_value(text, None))


def render_markdown(result: DiffResult, *, show_all: bool = False) -> str:
    """The diff as GitHub-flavoured Markdown: likely causes, then one table per section."""
    lines = [f"### repro diff {_md_code(result.a.id)} → {_md_code(result.b.id)}", ""]
    if not result.differs:
        lines.append("No recorded differences.")
    elif not result.results_differ:
        same = "**Results identical** (outputs, metrics, stdout and exit status)."
        lines += [f"{same} Changed without effect on results:", ""]
        lines += [f"- {_md(c.reason)}" for c in result.without_effect]
    else:
        lines += ["**Likely causes**, most likely first:", ""]
        lines += [f"{i}. {_md(c.reason)}" for i, c in enumerate(result.likely_causes, 1)]
        lines += ["", _md(_results_line(result).strip())]
    if result.proof is not None:  # proved causes above the likely ones
        lines[2:2] = [*proof_ui.markdown_lines(result.proof, _md), ""]
    for section in result.sections:
        if section.differs or show_all:
            lines += ["", f"#### {_md(section.title)}", ""]
            lines += _md_section(section) if section.differs else ["same"]
    return "\n".join(printable(line) for line in lines) + "\n"


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _md_section(section: Section) -> list[str]:
    lines = [_md(section.summary), ""] if section.summary else []
    files = [c for c in section.changes if c.scope == "file"]
    grouped = len(files) > MAX_LISTED and bool(section.groups)
    changes = [c for c in section.changes if not (grouped and c.scope == "file")]
    if changes:
        lines += ["| | item | A | B | detail |", "|---|---|---|---|---|"]
        for c in changes:
            detail = c.detail or ""
            if c.scope == "final" and c.delta is not None:
                detail = f"{'+' if c.delta >= 0 else '−'}{abs(c.delta):.4g}"
            old, new = c.old, c.new
            if c.scope in _SIZED and isinstance(old or new, int):
                old, new = (None if v is None else human_bytes(int(v)) for v in (old, new))
            cells = [_MARK.get(c.kind, "~"), _md_code(c.key), _md(old), _md(new), _md(detail)]
            lines.append(_md_row(cells))
    if grouped:
        lines += ["", "| directory | added | removed | changed | bytes |", "|---|---|---|---|---|"]
        for g in section.groups:
            cells = [
                _md_code(g.dir),
                str(g.added),
                str(g.removed),
                str(g.changed),
                _bytes_delta(g.bytes_delta),
            ]
            lines.append(_md_row(cells))
    if section.divergence is not None:
        d = section.divergence
        lines += ["", f"First divergence: {_md_code(d.metric)} at step {d.step}: {_md(d.a)} → {_md(d.b)}"]
    for note in section.notes:
        lines += ["", f"_{_md(note)}_"]
    if section.patch:
        lines += ["", "<details><summary>code diff</summary>", ""]
        lines += escape.markdown_fence(section.patch.rstrip("\n").splitlines(), "diff")
        lines += ["", "</details>"]
    return lines


def render_json(result: DiffResult) -> dict[str, Any]:
    """The documented JSON document (docs/diff.md)."""
    return result.to_dict()


# --------------------------------------------------------------------------- plot


def plot_metrics(
    a_rows: list[dict[str, Any]], b_rows: list[dict[str, Any]], labels: tuple[str, str], path: Path
) -> Path:
    """Overlay both runs' metric curves, one panel per metric, each first divergence marked, into a
    PNG or SVG at ``path`` (`repro.ui.curves`).

    Raises:
        UsageError: matplotlib is not installed, another format, or neither run has a metric series.
    """
    return curves_ui.plot(curves_of_rows(a_rows, b_rows, labels), path)
