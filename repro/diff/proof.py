"""What `repro diff A B --prove` found by experiment, as plain data: the factors (the differences the
diff found that a re-execution can take from run B), the effect of each, the smallest set that turns
A's result into B's, and the runs made. `repro.prove` decides it; `repro.ui.proof` renders it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# changes_result: taking it alone from B changes A's result; no_effect: alone it does not, and the set
# found needs it not; only_together: alone it does not, but the set found needs it; not_tested: the
# budget ran out first; cannot_swap: no re-execution can take it from B here (``why_not`` says why).
Effect = Literal["changes_result", "no_effect", "only_together", "not_tested", "cannot_swap"]
EFFECTS: tuple[Effect, ...] = ("changes_result", "only_together", "no_effect", "not_tested", "cannot_swap")


@dataclass
class Factor:
    """One difference between the runs as something an experiment takes from B: ``code:PATH``,
    ``data:PATH``, ``param:KEY``, ``seed``, ``mode``, ``threads``, ``isa``, ``env:NAME``, ``dependencies``,
    ``machine:…``."""

    id: str
    section: str  # the diff section it comes from
    a: Any = None  # its value (or a short description) in run A
    b: Any = None
    why_not: str | None = None  # why it cannot be swapped; None: it can

    @property
    def swappable(self) -> bool:
        return self.why_not is None

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {"id": self.id, "section": self.section, "a": _plain(self.a), "b": _plain(self.b),
                "swappable": self.swappable, "why_not": self.why_not}  # fmt: skip


@dataclass
class Experiment:
    """One execution of run A with ``factors`` taken from run B, and how its results compare with
    A's and with B's (a verdict status each: identical, within_tolerance, diverged, failed)."""

    run: str
    factors: list[str]
    vs_a: str
    vs_b: str
    divergence: str | None = None  # where it first parts from A: ``step 3 (fc.weight)``, ``loss at step 4``
    seconds: float = 0.0
    error: str | None = None  # why it could not execute at all (then ``run`` is empty); None: it ran
    op: str | None = None  # `--ops`: the first op whose result differs from A's, where the streams say

    @property
    def like_a(self) -> bool:
        return self.error is None and self.vs_a in ("identical", "within_tolerance")

    @property
    def like_b(self) -> bool:
        return self.error is None and self.vs_b in ("identical", "within_tolerance")

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {"run": self.run, "factors": list(self.factors), "vs_a": self.vs_a, "vs_b": self.vs_b,
                "divergence": self.divergence, "op": self.op, "seconds": round(self.seconds, 3),
                "error": self.error}  # fmt: skip


@dataclass
class Finding:
    """What the experiments showed about one factor."""

    factor: Factor
    effect: Effect
    together_with: list[str] = field(default_factory=list)  # only_together: the others of the set found
    divergence: str | None = None  # changes_result: where taking it alone first parts from A
    op: str | None = None  # changes_result, `--ops`: the first op of that experiment that differs from A's

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {"factor": self.factor.to_dict(), "effect": self.effect,
                "together_with": list(self.together_with), "divergence": self.divergence,
                "op": self.op}  # fmt: skip


@dataclass
class Proof:
    """The whole experiment: per factor its effect, the set found (``proved``), whether it turns A's
    result into B's (``explained``), the runs made, and what the budget left untested."""

    budget: int
    findings: list[Finding] = field(default_factory=list)
    proved: list[str] = field(default_factory=list)
    explained: bool = False
    experiments: list[Experiment] = field(default_factory=list)
    untested: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    compared_by: str = "identical bytes (strict mode)"  # or the tolerance a non-strict mode uses
    # How the experiments executed: `repro.prove.windowing.Windowing.to_dict` (windowed replays from a
    # shared checkpoint, or whole runs and why); None where none was made.
    window: dict[str, Any] | None = None

    def of(self, effect: Effect) -> list[Finding]:
        """The findings with that effect, in factor order."""
        return [f for f in self.findings if f.effect == effect]

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order (the ``proof`` of docs/diff.md)."""
        return {
            "budget": self.budget,
            "executions": len(self.experiments),
            "compared_by": self.compared_by,
            "window": self.window,
            "proved": list(self.proved),
            "explained": self.explained,
            "findings": [f.to_dict() for f in self.findings],
            "experiments": [e.to_dict() for e in self.experiments],
            "untested": list(self.untested),
            "notes": list(self.notes),
        }


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)
