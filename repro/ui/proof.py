"""Rendering of a `Proof` (`repro diff --prove`): the proved causes, as lines of text or Markdown,
shown above the likely causes. JSON is the proof's own ``to_dict`` (docs/diff.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from repro.diff.proof import Experiment, Finding, Proof
from repro.units import plural


def effect_phrase(f: Finding) -> str:
    """``changes the result (first at step 3 (fc.weight))``, ``no effect``, ``only together with seed``…"""
    if f.effect == "changes_result":
        first = [x for x in (f.divergence and f"first at {f.divergence}", f.op and f"first op {f.op}") if x]
        return "changes the result" + (f" ({'; '.join(first)})" if first else "")
    if f.effect == "only_together":
        return "only together with " + ", ".join(f.together_with)
    if f.effect == "no_effect":
        return "no effect"
    if f.effect == "not_tested":
        return "not tested (budget spent)"
    return f"cannot be swapped: {f.factor.why_not}"


def _verdict(e: Experiment) -> str:
    return f"could not run: {e.error}" if e.error is not None else f"vs A {e.vs_a}, vs B {e.vs_b}"


def window_phrase(window: dict[str, Any]) -> str:
    """How the experiments executed: ``windowed: 7 optimizer steps from checkpoints/epoch1.pt (step 8)``
    or ``whole runs: …`` and why."""
    if not window.get("windowed"):
        return f"experiments: whole runs ({window.get('why_not')})"
    return (
        f"experiments: windowed, {plural(int(window['steps']), 'optimizer step')} from checkpoint "
        f"{window['checkpoint']} (step {window['from_step']}), where A and B still agree"
    )


def headline(proof: Proof) -> str:
    """One line: the set found, or that none was."""
    if not proof.findings and not proof.experiments:
        return "proved causes: none to prove"
    if proof.explained:
        return f"proved causes: {', '.join(proof.proved)} turn A's result into B's"
    return "proved causes: no set of swappable factors turns A's result into B's"


def text_lines(proof: Proof) -> list[str]:
    """The proof as text lines (not yet cut to a width)."""
    made = plural(len(proof.experiments), "execution")
    lines = [
        headline(proof),
        f"  ({made} of a budget of {proof.budget}; results compared by {proof.compared_by})",
    ]
    if proof.window is not None:
        lines.append(f"  {window_phrase(proof.window)}")
    width = max((len(f.factor.id) for f in proof.findings), default=0)
    for f in proof.findings:
        lines.append(f"  {f.factor.id.ljust(width)}  {effect_phrase(f)}")
    if proof.experiments:
        lines.append("  runs made (hidden from `repro ls`; `repro show ID`):")
        for e in proof.experiments:
            lines.append(
                f"    {e.run or '(not run)'}  {', '.join(e.factors)} from B: {_verdict(e)} ({e.seconds:.1f}s)"
            )
    if proof.untested:
        lines.append(f"  left untested: {', '.join(proof.untested)}")
    lines += [f"  note: {n}" for n in proof.notes]
    return lines


def markdown_lines(proof: Proof, esc: Callable[[Any], str] = str) -> list[str]:
    """The proof as Markdown: a headline, a table of factors, the runs made. ``esc`` escapes a cell."""
    lines = [f"**{esc(headline(proof).capitalize())}** ({plural(len(proof.experiments), 'execution')} "
             f"of a budget of {proof.budget}; results compared by {esc(proof.compared_by)})", ""]  # fmt: skip
    if proof.window is not None:
        lines += [f"*{esc(window_phrase(proof.window))}*", ""]
    if proof.findings:
        lines += ["| factor | effect |", "| --- | --- |"]
        lines += [f"| `{f.factor.id}` | {esc(effect_phrase(f))} |" for f in proof.findings]
        lines.append("")
    if proof.experiments:
        lines += ["| run | taken from B | result |", "| --- | --- | --- |"]
        for e in proof.experiments:
            run = f"`{e.run}`" if e.run else "(not run)"
            lines.append(f"| {run} | {esc(', '.join(e.factors))} | {esc(_verdict(e))} |")
        lines.append("")
    if proof.untested:
        lines += [f"Left untested: {esc(', '.join(proof.untested))}", ""]
    lines += [f"- {esc(n)}" for n in proof.notes]
    return lines
