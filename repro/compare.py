"""Compare two runs' results: outputs, tensors, metric series and stdout → a Verdict.

Pure data in, pure data out: nothing here prints, and rendering lives in
``repro.ui.verdict``. Tensor files are loaded and compared by ``repro.tensors`` (which
imports numpy and torch only when a tensor file has to be opened); tolerances live in
``repro.tolerance`` (the ``|a - b| <= atol + rtol * |a|`` rule and each mode's
default). Their public names are re-exported here.

Verdict rules (README, "Replay verdicts"):

- the replay failed (non-zero exit, or status other than ``succeeded``) → ``failed``;
- ``strict`` mode: every output byte-identical, every metric value equal and stdout
  equal (timing tokens aside) → ``identical``, anything else → ``diverged``;
- ``gpu``/``off`` modes: all of the above → ``identical``; otherwise, when every
  differing output is a tensor file whose tensors have the same names, shapes and
  dtypes and values within tolerance, every metric value is within tolerance and
  stdout differs only in numbers within tolerance → ``within_tolerance``; anything
  else → ``diverged``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from repro.capsule import FileEntry
from repro.errors import ExitCode, UsageError
from repro.steptrace import TraceDivergence, compare_trace
from repro.steptrace import describe as describe_trace
from repro.tensors import (
    TENSOR_SUFFIXES,
    TensorDiff,
    TensorMismatch,
    TensorReport,
    UnreadableTensorFile,
    compare_tensor_files,
    compare_tensors,
    is_tensor_file,
    load_tensors,
)
from repro.tolerance import DEFAULT_TOLERANCES, MODES, STRICT, Tolerance, check_mode, largest, tolerance_for

__all__ = [
    "REPRODUCED",
    "DEFAULT_TOLERANCES",
    "MODES",
    "STATUSES",
    "STRICT",
    "TENSOR_SUFFIXES",
    "MetricDivergence",
    "OutputDiff",
    "Side",
    "StdoutDivergence",
    "TraceDivergence",
    "TensorDiff",
    "TensorMismatch",
    "TensorReport",
    "Tolerance",
    "UnreadableTensorFile",
    "Verdict",
    "compare_all",
    "compare_metrics",
    "compare_runs",
    "compare_stdout",
    "compare_tensor_files",
    "compare_tensors",
    "exit_code_for",
    "is_tensor_file",
    "load_tensors",
    "normalise_line",
    "tolerance_for",
    "worst_status",
]

STATUSES = ("identical", "within_tolerance", "diverged", "failed")


# --------------------------------------------------------------------------- inputs


@dataclass
class Side:
    """One run's results as the comparison sees them."""

    label: str
    outputs: list[FileEntry]
    open_output: Callable[[FileEntry], Path | None]
    metrics: list[dict[str, Any]]
    stdout: str
    exit_code: int | None = None
    status: str = "succeeded"
    trace: list[dict[str, Any]] = field(default_factory=list)  # rows of trace.jsonl, when recorded

    @property
    def failed(self) -> bool:
        return self.status != "succeeded" or (self.exit_code is not None and self.exit_code != 0)


# --------------------------------------------------------------------------- results


@dataclass
class OutputDiff:
    """One output path compared across the two sides."""

    path: str
    status: str  # same | changed | missing (replay lacks it) | added (replay only)
    original_hash: str | None = None
    replay_hash: str | None = None
    original_size: int | None = None
    replay_size: int | None = None
    tensors: TensorReport | None = None
    note: str | None = None  # why no tensor report, when a changed file has none

    @property
    def within_tolerance(self) -> bool:
        """A changed tensor file whose tensors are all within tolerance (or any same file)."""
        if self.status == "same":
            return True
        return self.status == "changed" and self.tensors is not None and self.tensors.within_tolerance


@dataclass
class MetricDivergence:
    """Where two metric series part: the decisive divergence, or the first difference."""

    name: str
    step: int | None
    index: int  # position within that metric's series, from 0
    original: Any  # value on the original side (None where the series had ended)
    replay: Any
    kind: str  # value | step | length | missing
    abs_diff: float | None
    within_tolerance: bool
    original_count: int  # rows in the original's metrics
    replay_count: int
    differing: int  # aligned values that differ at all
    max_abs: float | None  # largest difference over all aligned numeric values


@dataclass
class StdoutDivergence:
    """The first stdout line that differs (timing tokens aside)."""

    line: int  # 1-based
    original: str | None  # None where that side had no more lines
    replay: str | None
    within_tolerance: bool
    differing: int  # lines that differ
    original_lines: int
    replay_lines: int
    max_abs: float | None


REPRODUCED = ("identical", "within_tolerance")


def exit_code_for(status: str) -> ExitCode:
    """0 reproduced, 4 a command failed, 5 not reproduced (README, "Exit codes")."""
    if status == "failed":
        return ExitCode.COMMAND_FAILED
    return ExitCode.OK if status in REPRODUCED else ExitCode.NOT_REPRODUCED


@dataclass
class Verdict:
    """The outcome of comparing a replay (or a repeated run) with its original."""

    status: str  # identical | within_tolerance | diverged | failed
    mode: str
    original: str = ""
    replay: str = ""
    tolerance: Tolerance | None = None  # None in strict mode
    outputs: list[OutputDiff] = field(default_factory=list)
    metrics: MetricDivergence | None = None
    stdout: StdoutDivergence | None = None
    trace: TraceDivergence | None = None  # the first optimizer step and parameter that differ
    max_abs: float | None = None
    summary: str = ""
    reasons: list[str] = field(default_factory=list)  # why diverged / failed, most decisive first
    notes: list[str] = field(default_factory=list)  # context callers add: data drift, backend change…

    @property
    def reproduced(self) -> bool:
        return self.status in REPRODUCED

    @property
    def exit_code(self) -> ExitCode:
        """The CLI exit code this verdict maps to (README, "Exit codes")."""
        return exit_code_for(self.status)

    @property
    def changed_outputs(self) -> list[OutputDiff]:
        return [o for o in self.outputs if o.status != "same"]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (non-finite floats become the strings "inf", "-inf", "nan")."""
        data = dataclasses.asdict(self)
        data["reproduced"] = self.reproduced
        safe: dict[str, Any] = _json_safe(data)
        return safe


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


# --------------------------------------------------------------------------- runs


def compare_runs(original: Side, replay: Side, mode: str, tol: Tolerance | None = None) -> Verdict:
    """Compare a replay (or a repeated run) with the original and decide the verdict.

    ``tol`` defaults to the mode's tolerance (``tolerance_for``); strict mode ignores it.

    Raises:
        UsageError: an unknown mode.
    """
    check_mode(mode)
    tolerance = STRICT if mode == "strict" else (tol or DEFAULT_TOLERANCES[mode])
    outputs = _compare_outputs(original, replay, tolerance)
    metrics = compare_metrics(original.metrics, replay.metrics, tolerance)
    stdout = compare_stdout(original.stdout, replay.stdout, tolerance)
    trace = (
        compare_trace(original.trace, replay.trace, tolerance) if original.trace and replay.trace else None
    )
    verdict = Verdict(
        status="identical",
        mode=mode,
        original=original.label,
        replay=replay.label,
        tolerance=None if mode == "strict" else tolerance,
        outputs=outputs,
        metrics=metrics,
        stdout=stdout,
        trace=trace,
        max_abs=largest(
            [o.tensors.max_abs for o in outputs if o.tensors]
            + [metrics.max_abs if metrics else None, stdout.max_abs if stdout else None]
        ),
    )
    verdict.reasons = _reasons(verdict, original, replay)
    verdict.status = _decide(verdict, original, replay)
    verdict.summary = _summary(verdict)
    return verdict


def compare_all(sides: Sequence[Side], mode: str, tol: Tolerance | None = None) -> list[Verdict]:
    """Compare run 1 with each of runs 2..N (``repro check --runs N``).

    Raises:
        UsageError: fewer than two runs, or an unknown mode.
    """
    if len(sides) < 2:
        raise UsageError("comparing runs needs at least two of them")
    return [compare_runs(sides[0], other, mode, tol) for other in sides[1:]]


def worst_status(verdicts: Sequence[Verdict]) -> str:
    """The least reproducible status among verdicts (failed > diverged > within > identical)."""
    order = {s: i for i, s in enumerate(STATUSES)}
    return max((v.status for v in verdicts), key=order.__getitem__, default="identical")


def _decide(v: Verdict, original: Side, replay: Side) -> str:
    if replay.failed:
        return "failed"
    if original.failed:
        return "diverged"  # the original failed and the replay did not: another result
    same = all(o.status == "same" for o in v.outputs)
    if same and v.metrics is None and v.stdout is None and v.trace is None:
        return "identical"
    if v.mode == "strict":
        return "diverged"
    if (
        all(o.within_tolerance for o in v.outputs)
        and (v.metrics is None or v.metrics.within_tolerance)
        and (v.stdout is None or v.stdout.within_tolerance)
        and (v.trace is None or v.trace.within_tolerance)
    ):
        return "within_tolerance"
    return "diverged"


def _reasons(v: Verdict, original: Side, replay: Side) -> list[str]:
    reasons: list[str] = []
    if replay.failed:
        code = f" with status {replay.exit_code}" if replay.exit_code not in (None, 0) else ""
        reasons.append(f"{replay.label or 'the replay'} {replay.status}{code}")
    elif original.failed:
        reasons.append(f"{original.label or 'the original'} {original.status}; the replay succeeded")
    t = v.trace
    if t is not None and (v.mode == "strict" or not t.within_tolerance):
        reasons.append(describe_trace(t))  # where it started: the most telling reason
    for o in v.outputs:
        if o.status == "same" or (v.mode != "strict" and o.within_tolerance):
            continue
        reasons.append(_output_reason(o))
    m = v.metrics
    if m is not None and (v.mode == "strict" or not m.within_tolerance):
        reasons.append(_metric_reason(m))
    s = v.stdout
    if s is not None and (v.mode == "strict" or not s.within_tolerance):
        reasons.append(f"stdout differs at line {s.line}")
    return reasons


def _output_reason(o: OutputDiff) -> str:
    if o.status == "missing":
        return f"output {o.path} is missing from the replay"
    if o.status == "added":
        return f"output {o.path} appears only in the replay"
    t = o.tensors
    if t is None:
        return f"output {o.path} changed ({o.note or 'not a tensor file'})"
    if t.only_original or t.only_replay:
        names = t.only_original + t.only_replay
        return f"output {o.path}: tensor {names[0]} exists on one side only"
    if t.mismatched:
        m = t.mismatched[0]
        return f"output {o.path}: {m.name} {m.reason} {m.original} -> {m.replay}"
    worst = max(t.differing, key=lambda d: _nan_big(d.max_abs), default=None)
    if worst is None:
        return f"output {o.path} changed bytes; all tensors equal"
    return f"output {o.path}: tensor {worst.name} max abs {worst.max_abs:.3g}"


def _metric_reason(m: MetricDivergence) -> str:
    at = f"step {m.step}" if m.step is not None else f"value #{m.index + 1}"
    if m.kind == "length":
        return f"metric {m.name} has {m.original_count} vs {m.replay_count} values (ends at {at})"
    if m.kind == "missing":
        side = "original" if m.original is None else "replay"
        return f"metric {m.name} is logged only in the {'replay' if side == 'original' else 'original'}"
    if m.kind == "step":
        return f"metric {m.name} value #{m.index + 1} logged at step {m.original} vs {m.replay}"
    return f"metric {m.name} diverges at {at}: {m.original!r} -> {m.replay!r}"


def _nan_big(x: float) -> float:
    return math.inf if math.isnan(x) else x


def _summary(v: Verdict) -> str:
    n = len(v.outputs)
    if v.status == "identical":
        return f"identical: {n} output{'s' * (n != 1)} byte-identical, metrics and stdout equal"
    if v.status == "within_tolerance":
        parts = [f"{len(v.changed_outputs)} of {n} outputs"] if v.changed_outputs else []
        parts += [name for name, part in (("metrics", v.metrics), ("stdout", v.stdout)) if part is not None]
        size = f"max abs difference {v.max_abs:.3g}" if v.max_abs is not None else "no value differs"
        return f"within tolerance: {', '.join(parts) or 'output bytes'} differ within tolerance; {size}"
    head = "failed" if v.status == "failed" else "diverged"
    if not v.reasons:
        return head
    more = f" (+{len(v.reasons) - 1} more)" if len(v.reasons) > 1 else ""
    return f"{head}: {v.reasons[0]}{more}"


# --------------------------------------------------------------------------- outputs


def _compare_outputs(original: Side, replay: Side, tol: Tolerance) -> list[OutputDiff]:
    a = {e.path: e for e in original.outputs}
    b = {e.path: e for e in replay.outputs}
    diffs: list[OutputDiff] = []
    for path in sorted(a.keys() | b.keys()):
        ea, eb = a.get(path), b.get(path)
        d = OutputDiff(
            path=path,
            status="same",
            original_hash=ea.hash if ea else None,
            replay_hash=eb.hash if eb else None,
            original_size=ea.size if ea else None,
            replay_size=eb.size if eb else None,
        )
        if ea is None:
            d.status = "added"
        elif eb is None:
            d.status = "missing"
        elif ea.hash != eb.hash:
            d.status = "changed"
            d.tensors, d.note = _tensor_report(original, ea, replay, eb, tol)
        diffs.append(d)
    return diffs


def _tensor_report(
    original: Side, ea: FileEntry, replay: Side, eb: FileEntry, tol: Tolerance
) -> tuple[TensorReport | None, str | None]:
    if not is_tensor_file(ea.path):
        return None, "not a tensor file"
    pa, pb = original.open_output(ea), replay.open_output(eb)
    if pa is None or pb is None:
        who = original.label if pa is None else replay.label
        return None, f"bytes not kept for {who or 'one side'}"
    try:
        return compare_tensor_files(pa, pb, tol, suffix=PurePosixPath(ea.path).suffix), None
    except UnreadableTensorFile as e:
        return None, f"unreadable: {e.reason}"


# --------------------------------------------------------------------------- metrics


def _metric_key(row: dict[str, Any]) -> str:
    name = str(row.get("name", "?"))
    rank = row.get("rank")
    return f"{name} (rank {rank})" if rank not in (None, 0) else name


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def compare_metrics(
    original: list[dict[str, Any]], replay: list[dict[str, Any]], tol: Tolerance
) -> MetricDivergence | None:
    """Walk two metric logs in the original's order; None when the series are equal.

    Series are keyed by name (and rank when not 0) and aligned by position within the
    series. The decisive divergence is reported: the first one out of tolerance or
    structural (another step, a series longer or missing on one side); when every
    difference is within tolerance, the first difference.
    """
    series_b: dict[str, list[dict[str, Any]]] = {}
    for row in replay:
        series_b.setdefault(_metric_key(row), []).append(row)
    seen: dict[str, int] = {}
    first: MetricDivergence | None = None
    decisive: MetricDivergence | None = None
    differing = 0
    deltas: list[float | None] = []

    def div(kind: str, name: str, step: Any, i: int, va: Any, vb: Any, delta: float | None = None,
            ok: bool = False) -> MetricDivergence:  # fmt: skip
        return MetricDivergence(name, step, i, va, vb, kind, delta, ok, len(original), len(replay), 0, None)

    for row in original:
        key = _metric_key(row)
        i = seen[key] = seen.get(key, -1) + 1
        other = series_b.get(key)
        step, va = row.get("step"), row.get("value")
        if other is None or i >= len(other):
            differing += 1
            decisive = decisive or div("missing" if other is None else "length", key, step, i, va, None)
            continue
        brow = other[i]
        if brow.get("step") != step:
            differing += 1
            decisive = decisive or div("step", key, step, i, step, brow.get("step"))
            continue
        vb = brow.get("value")
        fa, fb = _as_float(va), _as_float(vb)
        if fa is not None and fb is not None:
            if fa == fb or (math.isnan(fa) and math.isnan(fb)):
                continue
            delta: float | None = abs(fa - fb) if math.isfinite(fa - fb) else math.inf
            deltas.append(delta)
            ok = tol.close(fa, fb)
        elif va == vb:
            continue
        else:
            delta, ok = None, False
        differing += 1
        found = div("value", key, step, i, va, vb, delta, ok)
        first = first or found
        if not ok:
            decisive = decisive or found
    for key, rows in series_b.items():
        n = seen.get(key, -1) + 1
        if n < len(rows):
            differing += len(rows) - n
            kind = "length" if key in seen else "missing"
            decisive = decisive or div(kind, key, rows[n].get("step"), n, None, rows[n].get("value"))
    result = decisive or first
    if result is not None:
        result.differing = differing
        result.max_abs = largest(deltas)
    return result


# --------------------------------------------------------------------------- stdout

# Substrings that mark a line as reporting time; in such lines the timing tokens are
# replaced before comparing, and every other line is compared as it is.
_TIMING_LINE = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}"
    r"|\b\d{1,2}:\d{2}(:\d{2})?\b"
    r"|\btook\b|\belapsed\b|\bduration\b|\beta\b|\btime\b|\btimestamp\b"
    r"|it/s|s/it|/step\b|/sec\b|/s\b|\bper sec"
    r"|\d\s*(ms|us|µs|ns|s|sec|secs|seconds?|min|mins|minutes?|h|hrs?|hours?)\b",
    re.IGNORECASE,
)
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_TIMING_TOKENS = [
    re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"),
    re.compile(r"\b\d{1,3}:\d{2}(?::\d{2})?(?:[.,]\d+)?\b"),
    re.compile(
        _NUM + r"\s*(?:it/s|s/it|ms/step|s/step|ms/it|samples/s(?:ec)?|tokens/s(?:ec)?|img/s|ex/s"
        r"|steps/s(?:ec)?|batch(?:es)?/s)",
        re.IGNORECASE,
    ),
    re.compile(
        _NUM + r"\s*(?:ms|us|µs|ns|s|sec|secs|seconds?|min|mins|minutes?|h|hrs?|hours?)\b", re.IGNORECASE
    ),
    re.compile(
        r"(\b(?:took|elapsed|duration|eta|time|timestamp)\b[^\d\-+.]{0,12})" + _NUM,
        re.IGNORECASE,
    ),
]
_NUMBER = re.compile(_NUM)


def normalise_line(line: str) -> str:
    """A stdout line with its timing tokens (dates, clock times, durations, rates) masked."""
    line = line.rstrip()
    if not _TIMING_LINE.search(line):
        return line
    for pattern in _TIMING_TOKENS[:-1]:
        line = pattern.sub("<t>", line)
    return _TIMING_TOKENS[-1].sub(r"\1<t>", line)


def _lines(text: str) -> list[str]:
    # A carriage return redraws a line (progress bars): keep what the terminal shows last.
    out = []
    for raw in text.split("\n"):  # not splitlines(): it would split at every \r too
        parts = [p for p in raw.split("\r") if p.strip()]
        out.append((parts[-1] if parts else "").rstrip())
    while out and not out[-1]:
        out.pop()
    return out


def _numbers_close(a: str, b: str, tol: Tolerance) -> tuple[bool, float | None]:
    """Whether two lines differ only in numbers within tolerance, and the largest difference.

    A printed decimal is a rounded value, so one unit in its last printed place is
    allowed on top of the tolerance, but only where that unit is at most 1e-3 of the
    value (about four significant digits): a coarse print such as ``0.8`` vs ``0.9``
    proves nothing either way and counts as a difference. Integers get no allowance.
    """
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False, None
    largest: float | None = None
    ok = True
    for ma, mb in zip(_NUMBER.finditer(a), _NUMBER.finditer(b), strict=True):
        sa, sb = ma.group(), mb.group()
        if sa == sb:
            continue
        fa, fb = float(sa), float(sb)
        delta = abs(fa - fb)
        largest = delta if largest is None else max(largest, delta)
        slack = max(_last_place(sa), _last_place(sb))
        if slack > 1e-3 * max(abs(fa), abs(fb)):
            slack = 0.0
        if not (tol.close(fa, fb) or (slack and delta <= slack + tol.atol + tol.rtol * abs(fa))):
            ok = False
    return ok, largest


def _last_place(text: str) -> float:
    """One unit in the last printed place of a decimal number; 0 for an integer."""
    mantissa, _, exp = text.lower().partition("e")
    if "." not in mantissa and not exp:
        return 0.0
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (-decimals + (int(exp) if exp else 0))


def compare_stdout(original: str, replay: str, tol: Tolerance) -> StdoutDivergence | None:
    """Compare two stdout texts line by line, timing tokens masked; None when equal."""
    la, lb = _lines(original), _lines(replay)
    na, nb = [normalise_line(x) for x in la], [normalise_line(x) for x in lb]
    first: StdoutDivergence | None = None
    decisive: StdoutDivergence | None = None
    differing = 0
    deltas: list[float | None] = []
    for i in range(max(len(la), len(lb))):
        a = la[i] if i < len(la) else None
        b = lb[i] if i < len(lb) else None
        if a is not None and b is not None and na[i] == nb[i]:
            continue
        differing += 1
        ok, delta = (False, None) if a is None or b is None else _numbers_close(na[i], nb[i], tol)
        deltas.append(delta)
        div = StdoutDivergence(
            line=i + 1,
            original=a,
            replay=b,
            within_tolerance=ok,
            differing=0,
            original_lines=len(la),
            replay_lines=len(lb),
            max_abs=None,
        )
        first = first or div
        if not ok:
            decisive = decisive or div
    result = decisive or first
    if result is not None:
        result.differing = differing
        result.max_abs = largest(deltas)
    return result
