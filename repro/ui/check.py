"""Rendering of a `CheckResult`: text, JSON, Markdown, JUnit XML, and the failure text of a test report.

Every form is built from the result's typed data (verdicts, records, the diff); each
verdict is drawn by ``repro.ui.verdict`` and the capsule diff by ``repro.ui.diff``.
Nothing here decides whether the check passed: ``CheckResult`` and ``output_fails`` do. Lines
holding a record's strings (paths, log lines) pass through ``repro.ui.printable``.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from repro import schemas
from repro.check import CheckResult, output_fails
from repro.compare.reasons import Code
from repro.compare.verdict import Verdict, worst_status
from repro.ui import diff as diff_render
from repro.ui import escape, printable, style
from repro.ui import verdict as render
from repro.units import plural

LOG_TAIL = 20  # lines of a failed command's stderr shown


# --------------------------------------------------------------------------- text


def _verdicts_text(verdicts: Sequence[Verdict], colour: bool, width: int | None) -> str:
    """Run 1 against runs 2..N: an overall line, then each verdict."""
    label, hue = render.HEAD[worst_status(verdicts)]
    runs = len(verdicts) + 1
    compared = "run 2 compared with run 1" if runs == 2 else f"runs 2–{runs} each compared with run 1"
    head = f"{style(label, hue) if colour else label}  {runs} runs: {compared}"
    parts = [head]
    for v in verdicts:
        parts += ["", render.render_text(v, colour=colour, width=width)]
    return "\n".join(parts)


def _interrupt_text(result: CheckResult, colour: bool, width: int | None) -> str:
    """`check --interrupt`: an overall line, what a resume did not restore, then each resume's verdict."""
    label, hue = render.HEAD[worst_status(result.verdicts)]
    resumed = plural(len(result.verdicts), "killed and resumed run")
    head = f"{style(label, hue) if colour else label}  {resumed} "
    parts = [head + "compared with the uninterrupted run"]
    parts += [printable(f"  not restored: {c.describe()}") for c in result.causes]
    parts += [printable(f"  {line}") for line in _state_lines(result)]
    parts += [printable(f"  {_control_line(c)}") for c in result.controls if c["caught"]]
    for v in result.verdicts:
        parts += ["", render.render_text(v, colour=colour, width=width)]
    return "\n".join(parts)


def _state_lines(result: CheckResult) -> list[str]:
    """Each ordinary resume's state against the uninterrupted run's, per rank (controls have theirs)."""
    lines = []
    for s in (s for s in result.states if not s.control and s.ranks):
        if all(r.first is None for r in s.ranks):
            steps = ", ".join(f"rank {r.rank}: {r.steps}" for r in s.ranks)
            lines.append(f"resume {s.run}: every rank's state the same from the resume point (steps {steps})")
        else:
            lines += [f"resume {s.run}: {r.text()}" for r in s.ranks]
    return lines


SPOILED = {"rng": "its RNG states not restored", "sampler": "its samplers' epoch reset"}


def _control_line(c: dict[str, Any]) -> str:
    """A caught control: what it spoiled, the output that differs and the first state that does."""
    state = f"; {c['state']}" if c.get("state") else ""
    what = SPOILED.get(c["spoiled"], c["spoiled"])
    return f"control caught: resume {c['run']}, {what}, differs: {c['by']}{state}"


def render_text(result: CheckResult, *, colour: bool = True, width: int | None = render.WIDTH) -> str:
    """The check for people: the verdicts, what changed since a capsule, the outputs that differ;
    lines cut at ``width`` (a terminal's), never when it is None."""
    result = escape.scrub_terminal(result)
    parts: list[str] = []
    if result.verdicts:
        if result.kind == "against":
            parts += [
                printable(f"check against {result.capsule}"),
                render.render_text(result.verdicts[0], colour=colour, width=width),
            ]
        elif result.kind == "interrupt":
            parts.append(_interrupt_text(result, colour, width))
        else:
            parts.append(_verdicts_text(result.verdicts, colour, width))
    if result.diff is not None and not result.reproduced:
        parts += ["", f"What changed since the capsule ({result.records[0].id} → {result.records[1].id})"]
        wanted = colour and diff_render.colour_wanted()
        parts.append(diff_render.render_text(result.diff, colour=wanted, width=width))
    differing = result.differing_outputs()
    if differing:
        parts += ["", printable("outputs that differ: " + ", ".join(differing))]
    return "\n".join(parts)


def render_failure(result: CheckResult, logs: Sequence[str] = ()) -> str:
    """Why a check failed, for a test report: the verdicts, what changed, the command's last lines."""
    result = escape.scrub_terminal(result)
    parts: list[str] = []
    if result.failed is not None:
        r = result.failed.results
        parts.append(f"the command failed: run {result.failed.id} {r.status} with exit status {r.exit_code}")
        parts += [printable(f"  {line}") for line in r.stderr_tail[-LOG_TAIL:]]
    elif result.kind == "against":
        parts.append(printable(f"not reproduced against {result.capsule}"))
    elif result.kind == "interrupt":
        parts.append("a resumed run did not reproduce the uninterrupted one")
        parts += [printable(f"not restored: {c.describe()}") for c in result.causes]
    else:
        parts.append(f"not reproduced: {len(result.records)} runs with seed {result.seed} differ")
    differing = result.differing_outputs()
    if differing:
        parts.append(printable("outputs that differ: " + ", ".join(differing)))
    if result.verdicts:
        parts += ["", _verdicts_text(result.verdicts, colour=False, width=None)]
    if result.diff is not None:
        parts += ["", "What changed since the capsule:", diff_render.render_text(result.diff, width=None)]
    if result.failed is None and not result.verdicts:
        parts += ["", "last output:", *(escape.terminal(line) for line in logs[-LOG_TAIL:])]
    return "\n".join(parts)


# --------------------------------------------------------------------------- JSON


def render_json(result: CheckResult) -> dict[str, Any]:
    """`repro check --json` (schemas/check.json): status and exit code first, then each verdict and
    the diff."""
    data: dict[str, Any] = {
        "format": schemas.format_name("check"),
        "status": result.status,
        "runs": [v.to_dict() for v in result.verdicts],
        "kind": result.kind,
        "exit_code": int(result.exit_code),
        "seed": result.seed,
        "run_ids": [r.id for r in result.records],
        "differing_outputs": result.differing_outputs(),
    }
    if result.capsule is not None:
        data["capsule"] = result.capsule
    if result.kind == "interrupt":
        data["causes"] = [dataclasses.asdict(c) | {"text": c.describe()} for c in result.causes]
        data["controls"] = result.controls
        data["states"] = [s.to_dict() for s in result.states]
    if result.diff is not None:
        data["diff"] = diff_render.render_json(result.diff)
    return data


# --------------------------------------------------------------------------- Markdown


def _verdicts_markdown(verdicts: Sequence[Verdict]) -> str:
    """An overview table, then each verdict that is not identical."""
    status = worst_status(verdicts)
    rows = [render.md_row(["run", "against", "verdict", "summary"]), render.md_row(["---"] * 4)]
    for v in verdicts:
        cells = [render.md_code(v.replay), render.md_code(v.original), render.md_cell(v.status)]
        rows.append(render.md_row([*cells, render.md_cell(v.summary)]))
    body = "\n".join([f"## {render.MD_HEAD[status]}", "", *rows]) + "\n"
    return body + "".join(
        "\n" + render.render_markdown(v, level=3) for v in verdicts if v.status != "identical"
    )


def render_markdown(result: CheckResult) -> str:
    """The check as Markdown, for a pull-request comment or $GITHUB_STEP_SUMMARY."""
    if not result.verdicts and result.failed is not None:
        r = result.failed.results
        tail = "\n".join(escape.markdown_fence(list(r.stderr_tail[-LOG_TAIL:])))
        run = escape.markdown_code(result.failed.id)
        return f"## ❌ Failed: run {run} exited with status {r.exit_code}\n\n{tail}\n"
    text = _verdicts_markdown(result.verdicts)
    if result.kind == "against":
        text = f"Check against {escape.markdown_code(result.capsule)}\n\n" + text
    if result.causes:
        text = (
            "".join(f"- not restored: {render.md_cell(c.describe())}\n" for c in result.causes) + "\n" + text
        )
    if result.diff is not None and not result.reproduced:
        text += "\n### What changed since the capsule\n\n" + diff_render.render_markdown(result.diff)
    return text


# --------------------------------------------------------------------------- JUnit


def _pair(result: CheckResult, index: int) -> str:
    if result.kind == "interrupt":
        return f"uninterrupted vs resume {index + 1}"
    return "capsule vs current code" if result.kind == "against" else f"run 1 vs run {index + 2}"


def _reason(v: Verdict, fallback: str, *, code: str | None = None, path: str | None = None) -> str:
    """The message of the verdict's first reason about output ``path``, or with ``code`` and no path.

    Chosen by the reasons' codes and paths (`repro.compare.reasons`), never by their wording.
    """
    if path is not None:
        found = (r for r in v.reasons if r.about_output(path))
    else:
        found = (r for r in v.reasons if r.code == code and r.path is None)
    return next((r.message for r in found), fallback)


def render_junit(result: CheckResult) -> str:
    """The check as JUnit XML: one testcase per compared output, plus metrics and stdout per verdict.

    A command that failed adds a testcase ``run`` carrying its exit status and last stderr lines.
    """
    suite = ET.Element("testsuite", name="repro check")
    tests = failures = 0

    def case(name: str, classname: str, failure: str | None, body: str = "") -> None:
        nonlocal tests, failures
        x = escape.xml  # a capsule's control characters would make the report not well-formed
        tc = ET.SubElement(suite, "testcase", name=x(name), classname=x(classname), time="0")
        tests += 1
        if failure is not None:
            failures += 1
            el = ET.SubElement(tc, "failure", message=x(failure), type="NotReproduced")
            el.text = x(body or failure)

    for i, v in enumerate(result.verdicts):
        pair, classname = _pair(result, i), f"repro.check.{v.replay or i + 2}"
        if v.status == "failed":
            case(f"{pair}: run", classname, _reason(v, "the run failed", code=Code.RUN_FAILED))
        for o in v.outputs:
            if not output_fails(v, o):
                case(f"{pair}: output {o.path}", classname, None)
                continue
            message = _reason(v, f"output {o.path}: {render.output_detail(o)}", path=o.path)
            detail = f"{o.original_hash or '—'} → {o.replay_hash or '—'}"
            case(f"{pair}: output {o.path}", classname, message, f"{message}\n{detail}")
        m = v.metrics
        m_fails = m is not None and (v.mode == "strict" or not m.within_tolerance)
        m_message = _reason(v, "metrics differ", code=Code.METRIC_DIFFERS) if m_fails else None
        case(f"{pair}: metrics", classname, m_message)
        s = v.stdout
        s_fails = s is not None and (v.mode == "strict" or not s.within_tolerance)
        body = f"- {s.original}\n+ {s.replay}" if s is not None else ""
        s_message = _reason(v, "stdout differs", code=Code.LOG_DIFFERS) if s_fails else None
        case(f"{pair}: stdout", classname, s_message, body)
    if result.failed is not None and not result.verdicts:
        r = result.failed.results
        message = f"run {result.failed.id} {r.status} with exit status {r.exit_code}"
        body = "\n".join([message, *r.stderr_tail[-LOG_TAIL:]])
        case("run", f"repro.check.{result.failed.id}", message, body)
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", "0")
    root = ET.Element("testsuites", name="repro", tests=str(tests), failures=str(failures), errors="0")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
