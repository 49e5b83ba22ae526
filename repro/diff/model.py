"""The result of a diff as plain data: changes, sections, likely causes, run summaries.

Every class has ``to_dict`` giving the documented JSON layout (``docs/diff.md``),
versioned by `DIFF_FORMAT`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from repro.diff.proof import Proof

DIFF_FORMAT = "repro.diff/v1"

# Section names, in the order they are compared and shown.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("command", "Command and hyper-parameters"),
    ("code", "Code"),
    ("data", "Data"),
    ("dependencies", "Dependencies"),
    ("seeds", "Seeds"),
    ("determinism", "Determinism"),
    ("environment", "Environment and hardware"),
    ("metrics", "Metrics"),
    ("outputs", "Outputs"),
    ("stdout", "Printed output (stdout)"),
)


TensorChangeKind = Literal["value", "shape", "dtype", "only_a", "only_b"]


@dataclass
class TensorChange:
    """One tensor of a changed tensor file that differs: by value (with its largest differences),
    or by shape, dtype or presence (``kind``: value | shape | dtype | only_a | only_b)."""

    name: str
    kind: TensorChangeKind = "value"
    max_abs: float | None = None
    max_rel: float | None = None
    a: str | None = None  # shape or dtype in run A, for a shape or dtype change
    b: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {"name": self.name, "kind": self.kind, "max_abs": _jsonable(self.max_abs),
                "max_rel": _jsonable(self.max_rel), "a": self.a, "b": self.b}  # fmt: skip


@dataclass
class TensorFileChange:
    """A changed tensor file compared by content: the tensors that differ, largest first, and how many
    are unchanged."""

    differing: list[TensorChange] = field(default_factory=list)
    unchanged: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {"differing": [t.to_dict() for t in self.differing], "unchanged": self.unchanged}


@dataclass
class Change:
    """One difference inside a section.

    kind: ``added`` | ``removed`` | ``changed`` | ``upgraded`` | ``downgraded``.
    scope: what sort of item ``key`` names inside its section (``param``, ``file``,
    ``lockfile``, ``knob`` …; see docs/diff.md). ``old``/``new`` are the values in run A
    and run B (None where absent); ``delta`` is ``new - old`` for numbers; ``lines`` is
    ``(added, removed)`` line counts for text files.
    """

    key: str
    kind: str
    scope: str = ""
    old: Any = None
    new: Any = None
    delta: float | None = None
    lines: tuple[int, int] | None = None
    detail: str | None = None
    tensors: TensorFileChange | None = None  # a changed tensor file, compared by content

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {
            "key": self.key,
            "kind": self.kind,
            "scope": self.scope,
            "old": _jsonable(self.old),
            "new": _jsonable(self.new),
            "delta": _jsonable(self.delta),
            "lines": None if self.lines is None else {"added": self.lines[0], "removed": self.lines[1]},
            "detail": self.detail,
            "tensors": self.tensors.to_dict() if self.tensors is not None else None,
        }


@dataclass
class DirGroup:
    """File changes of one directory summarised: counts and bytes."""

    dir: str
    added: int = 0
    removed: int = 0
    changed: int = 0
    bytes_added: int = 0
    bytes_removed: int = 0
    bytes_delta: int = 0

    @property
    def count(self) -> int:
        return self.added + self.removed + self.changed

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {
            "dir": self.dir,
            "added": self.added,
            "removed": self.removed,
            "changed": self.changed,
            "bytes_added": self.bytes_added,
            "bytes_removed": self.bytes_removed,
            "bytes_delta": self.bytes_delta,
        }


@dataclass
class Divergence:
    """The first step at which two metric series differ."""

    metric: str
    step: float | None  # an int but for series stepped by a fractional epoch
    a: float | None
    b: float | None

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {"metric": self.metric, "step": self.step, "a": _jsonable(self.a), "b": _jsonable(self.b)}


@dataclass
class Section:
    """One compared part of the record (command, code, data …) and its differences."""

    name: str
    title: str
    changes: list[Change] = field(default_factory=list)
    summary: str = ""
    groups: list[DirGroup] = field(default_factory=list)
    divergence: Divergence | None = None
    patch: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def differs(self) -> bool:
        return bool(self.changes) or self.divergence is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {
            "name": self.name,
            "title": self.title,
            "differs": self.differs,
            "summary": self.summary,
            "changes": [c.to_dict() for c in self.changes],
            "groups": [g.to_dict() for g in self.groups],
            "divergence": self.divergence.to_dict() if self.divergence else None,
            "patch": self.patch,
            "notes": list(self.notes),
        }


@dataclass
class Cause:
    """A likely cause of the difference in results, with a one-line reason."""

    section: str
    category: str
    reason: str
    rank: int
    keys: list[str] = field(default_factory=list)

    def to_dict(self, position: int) -> dict[str, Any]:
        """Plain data, stable key order; ``position`` is 1 for the most likely cause."""
        return {
            "position": position,
            "section": self.section,
            "category": self.category,
            "reason": self.reason,
            "rank": self.rank,
            "keys": list(self.keys),
        }


@dataclass
class ResultDifference:
    """One way the two runs' results differ, as a replay would say it (a code of
    `repro.compare.reasons` and one line)."""

    code: str
    message: str
    path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {"code": self.code, "message": self.message, "path": self.path}


@dataclass
class RunSummary:
    """Which run a side of the diff is."""

    id: str
    created: str
    status: str
    mode: str
    final_metrics: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {
            "id": self.id,
            "created": self.created,
            "status": self.status,
            "mode": self.mode,
            "final_metrics": {k: _jsonable(v) for k, v in self.final_metrics.items()},
        }


@dataclass
class DiffResult:
    """Everything `repro diff` found: the sections, ranked likely causes, and verdict flags."""

    a: RunSummary
    b: RunSummary
    sections: list[Section]
    likely_causes: list[Cause]  # empty when the results are identical: nothing to explain
    results_differ: bool
    without_effect: list[Cause] = field(default_factory=list)  # input differences, results identical
    results: list[ResultDifference] = field(default_factory=list)  # how the results differ, decisive first
    proof: Proof | None = None  # `--prove`: the causes proved by re-executing A with factors from B

    @property
    def differs(self) -> bool:
        return any(s.differs for s in self.sections)

    def section(self, name: str) -> Section:
        """The section called ``name``.

        Raises:
            KeyError: no section of that name.
        """
        for s in self.sections:
            if s.name == name:
                return s
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON layout (docs/diff.md), stable key order."""
        return {
            "format": DIFF_FORMAT,
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "differs": self.differs,
            "results_differ": self.results_differ,
            "likely_causes": [c.to_dict(i + 1) for i, c in enumerate(self.likely_causes)],
            "without_effect": [c.to_dict(i + 1) for i, c in enumerate(self.without_effect)],
            "results": [r.to_dict() for r in self.results],
            "sections": [s.to_dict() for s in self.sections],
            **({"proof": self.proof.to_dict()} if self.proof is not None else {}),
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value
