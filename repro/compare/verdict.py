"""Compare two runs' results: outputs, tensors, metric series and stdout → a Verdict.

Pure data in, pure data out: nothing here prints, and rendering lives in
``repro.ui.verdict``. Outputs are compared by ``repro.compare.outputs`` (tensor files through
``repro.compare.tensors``, metric files and TensorBoard events through ``repro.compare``),
metric series by ``repro.compare.metrics``, stdout by ``repro.compare.stdout`` with the timing
rule of ``repro.compare.logmask``; tolerances live in ``repro.compare.tolerance``. Their public names are
re-exported here. Each reason a verdict gives carries a code (``repro.compare.reasons``); callers
decide on codes, never on sentences.

Verdict rules (README, "Replay verdicts"):

- the replay failed (non-zero exit, or status other than ``succeeded``) → ``failed``;
- ``strict`` mode: every output byte-identical (or, for metric files and TensorBoard
  events, equal in every value; for figures, documents and archives, equal content with their
  clock fields left out), every metric value equal and stdout equal (timings
  masked) → ``identical``, anything else → ``diverged``;
- ``gpu``/``off`` modes: all of the above → ``identical``; otherwise, when every
  differing output's content is within tolerance (tensors with the same names, shapes
  and dtypes; metric values), every metric value is within tolerance and stdout differs
  only in numbers within tolerance → ``within_tolerance``; anything else → ``diverged``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

from repro.compare import dataorder
from repro.compare.logmask import LogMask, mask_timings
from repro.compare.metrics import MetricDivergence, compare_metrics
from repro.compare.outputs import OutputDiff, Outputs, compare_outputs
from repro.compare.reasons import Code, Reason
from repro.compare.stdout import StdoutDivergence, compare_stdout
from repro.compare.tensors import (
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
from repro.compare.tolerance import (
    DEFAULT_TOLERANCES,
    MODES,
    STRICT,
    Tolerance,
    check_mode,
    largest,
    tolerance_for,
)
from repro.compare.trace import TraceDivergence, compare_trace
from repro.compare.trace import describe as describe_trace
from repro.errors import ExitCode, UsageError
from repro.runtime.contract import Mode
from repro.store.record import FileEntry, RunStatus, SharedWrite
from repro.units import plural

__all__ = [
    "REPRODUCED",
    "DEFAULT_TOLERANCES",
    "MODES",
    "STATUSES",
    "Known",
    "explained",
    "STRICT",
    "TENSOR_SUFFIXES",
    "CompareOptions",
    "MetricDivergence",
    "OutputDiff",
    "Reason",
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

VerdictStatus = Literal["identical", "within_tolerance", "diverged", "failed"]  # best first
STATUSES: tuple[VerdictStatus, ...] = get_args(VerdictStatus)


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
    status: RunStatus = "succeeded"
    trace: list[dict[str, Any]] = field(default_factory=list)  # rows of trace.jsonl, when recorded
    data_order: dataorder.Rows = field(default_factory=dict)  # each rank's DataLoader batches, when recorded
    shared_writes: list[SharedWrite] = field(default_factory=list)  # outputs several processes wrote
    root: str | None = None  # the project root as the run saw it (`repro.compare.rootpath`)
    image: str | None = None  # the image id the run ran in (a docker run), where its pickles unpickle
    cut: list[str] = field(default_factory=list)  # the streams read only up to their bound, one line each

    @property
    def failed(self) -> bool:
        return self.status != "succeeded" or (self.exit_code is not None and self.exit_code != 0)


class CompareSettings(Protocol):
    """The settings a comparison reads (`repro.config.Settings` has them; the config imports this package)."""

    @property
    def compare_stdout(self) -> bool: ...
    @property
    def compare_mask(self) -> tuple[str, ...]: ...
    @property
    def compare_ignore_lines(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class CompareOptions:
    """What a comparison looks at beyond outputs and metrics (repro.yaml's ``compare:`` section).

    ``stdout=False`` leaves stdout out of the verdict; ``mask`` and ``ignore_lines`` are
    regular expressions (`repro.compare.logmask.LogMask`).
    """

    stdout: bool = True
    mask: tuple[str, ...] = ()
    ignore_lines: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: CompareSettings) -> CompareOptions:
        """The options repro.yaml's ``compare:`` section (or REPRO_COMPARE_STDOUT) sets."""
        return cls(settings.compare_stdout, settings.compare_mask, settings.compare_ignore_lines)

    def log_mask(self) -> LogMask:
        """The mask stdout is compared through.

        Raises:
            ConfigError: a pattern that is not a regular expression.
        """
        return LogMask(mask=self.mask, ignore_lines=self.ignore_lines)


# Why equal bytes at another world size are not `identical`.
WORLD_SIZE_CAVEAT = "at another world size (another reduction order: equal bytes are luck, not proof)"


@dataclass(frozen=True)
class Known:
    """What the caller knows of the two runs beyond their results, weighed by `compare_runs`."""

    world_size_changed: bool = False  # another reduction order: identical bytes are luck, not proof
    started_over: Reason | None = None  # a resumed run that loaded no checkpoint tested no resume


# --------------------------------------------------------------------------- results


REPRODUCED: tuple[VerdictStatus, ...] = ("identical", "within_tolerance")


def exit_code_for(status: str) -> ExitCode:
    """0 reproduced, 4 a command failed, 5 not reproduced (README, "Exit codes")."""
    if status == "failed":
        return ExitCode.COMMAND_FAILED
    return ExitCode.OK if status in REPRODUCED else ExitCode.NOT_REPRODUCED


@dataclass
class Verdict:
    """The outcome of comparing a replay (or a repeated run) with its original."""

    status: VerdictStatus
    mode: Mode
    original: str = ""
    replay: str = ""
    tolerance: Tolerance | None = None  # None in strict mode
    outputs: list[OutputDiff] = field(default_factory=list)
    metrics: MetricDivergence | None = None
    stdout: StdoutDivergence | None = None
    trace: TraceDivergence | None = None  # the first optimizer step and parameter that differ
    data_order: dataorder.DataOrderReport | None = None  # None: not recorded on both sides, or equal
    stdout_compared: bool = True  # False where compare.stdout is off
    max_abs: float | None = None
    summary: str = ""
    reasons: list[Reason] = field(default_factory=list)  # why diverged / failed, most decisive first
    notes: list[str] = field(default_factory=list)  # context callers add: data drift, backend change…
    ops_compared: bool = False  # `--ops` compared the op streams (then a reason op_differs, or a note)

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


def compare_runs(
    original: Side,
    replay: Side,
    mode: str,
    tol: Tolerance | None = None,
    options: CompareOptions | None = None,
    known: Known | None = None,
) -> Verdict:
    """Compare a replay (or a repeated run) with the original and decide the verdict.

    ``tol`` defaults to the mode's tolerance (``tolerance_for``); strict mode ignores it. ``known``:
    what the caller knows beyond the results (a world size changed, a resume that started over).

    Raises:
        UsageError: an unknown mode. ConfigError: a bad ``compare.mask``/``ignore_lines`` pattern.
    """
    checked = check_mode(mode)
    options = options or CompareOptions()
    tolerance = STRICT if mode == "strict" else (tol or DEFAULT_TOLERANCES[mode])
    outputs = compare_outputs(
        Outputs(original.label, original.outputs, original.open_output, original.root, original.image),
        Outputs(replay.label, replay.outputs, replay.open_output, replay.root, replay.image),
        tolerance,
    )
    metrics = compare_metrics(original.metrics, replay.metrics, tolerance)
    stdout = (
        compare_stdout(original.stdout, replay.stdout, tolerance, options.log_mask())
        if options.stdout
        else None
    )
    trace = (
        compare_trace(original.trace, replay.trace, tolerance) if original.trace and replay.trace else None
    )
    data_order = dataorder.compare(original.data_order, replay.data_order)
    verdict = Verdict(
        status="identical",
        mode=checked,
        original=original.label,
        replay=replay.label,
        tolerance=None if mode == "strict" else tolerance,
        outputs=outputs,
        metrics=metrics,
        stdout=stdout,
        trace=trace,
        data_order=data_order if data_order is not None and data_order.differs else None,
        stdout_compared=options.stdout,
        max_abs=largest(
            [o.tensors.max_abs for o in outputs if o.tensors]
            + [metrics.max_abs if metrics else None, stdout.max_abs if stdout else None]
        ),
    )
    if not options.stdout:
        verdict.notes.append("stdout left out of the comparison (compare.stdout: false)")
    verdict.notes += [f"{side.label}: {note}" for side in (original, replay) for note in side.cut]
    verdict.reasons = _reasons(verdict, original, replay)
    verdict.status = _decide(verdict, original, replay)
    verdict.summary = _summary(verdict)
    _weigh(verdict, known or Known())
    return verdict


def _weigh(v: Verdict, known: Known) -> None:
    """What the caller knows, over what the comparison found (the summary says what it found, under
    the status decided here)."""
    if known.world_size_changed and v.status == "identical":
        found = v.summary.removeprefix("identical: ")
        v.status, v.summary = "within_tolerance", f"within tolerance: {found}, {WORLD_SIZE_CAVEAT}"
    if known.started_over is not None:
        v.reasons.insert(0, known.started_over)
        v.status, v.summary = "diverged", f"diverged: {known.started_over.message}"


def explained(v: Verdict, reason: Reason, first: bool = False) -> None:
    """Add to a decided verdict a reason found by looking further once it diverged: the first op that
    differs (``--ops``, last), what a resume did not restore (``check --interrupt``, ``first``)."""
    v.reasons.insert(0 if first else len(v.reasons), reason)


def compare_all(
    sides: Sequence[Side], mode: str, tol: Tolerance | None = None, options: CompareOptions | None = None
) -> list[Verdict]:
    """Compare run 1 with each of runs 2..N (``repro check --runs N``).

    Raises:
        UsageError: fewer than two runs, or an unknown mode.
    """
    if len(sides) < 2:
        raise UsageError("comparing runs needs at least two of them")
    return [compare_runs(sides[0], other, mode, tol, options) for other in sides[1:]]


def worst_status(verdicts: Sequence[Verdict]) -> str:
    """The least reproducible status among verdicts (failed > diverged > within > identical)."""
    order = {s: i for i, s in enumerate(STATUSES)}
    return max((v.status for v in verdicts), key=order.__getitem__, default="identical")


def _decide(v: Verdict, original: Side, replay: Side) -> VerdictStatus:
    if replay.failed:
        return "failed"
    if original.failed:
        return "diverged"  # the original failed and the replay did not: another result
    same = all(o.status == "same" for o in v.outputs)
    if same and v.metrics is None and v.stdout is None and v.trace is None and v.data_order is None:
        return "identical"
    if v.data_order is not None:
        return "diverged"  # another training, whatever the tolerance
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


def _reasons(v: Verdict, original: Side, replay: Side) -> list[Reason]:
    found: list[Reason] = []
    if replay.failed:
        code = f" with status {replay.exit_code}" if replay.exit_code not in (None, 0) else ""
        found.append(
            Reason(
                Code.RUN_FAILED,
                f"{replay.label or 'the replay'} {replay.status}{code}",
                fields={"status": replay.status, "exit_code": replay.exit_code},
            )
        )
    elif original.failed:
        found.append(
            Reason(
                Code.ORIGINAL_FAILED,
                f"{original.label or 'the original'} {original.status}; the replay succeeded",
                fields={"status": original.status, "exit_code": original.exit_code},
            )
        )
    found += _data_order_reasons(v.data_order)
    t = v.trace
    if t is not None and (v.mode == "strict" or not t.within_tolerance):
        fields = {"step": t.step, "param": t.param, "kind": t.kind}
        found.append(Reason(Code.TRACE_DIFFERS, describe_trace(t), fields=fields))  # the most telling
    shared = {s.path: s for s in [*original.shared_writes, *replay.shared_writes]}
    for o in v.outputs:
        if o.status == "same" or (v.mode != "strict" and o.within_tolerance):
            continue
        reason = _output_reason(o)
        found.append(_concurrent_reason(reason, shared[o.path]) if o.path in shared else reason)
    m = v.metrics
    if m is not None and (v.mode == "strict" or not m.within_tolerance):
        fields = {"name": m.name, "step": m.step, "original": m.original, "replay": m.replay, "kind": m.kind}
        found.append(Reason(Code.METRIC_DIFFERS, _metric_reason(m), fields=fields))
    s = v.stdout
    if s is not None and (v.mode == "strict" or not s.within_tolerance):
        found.append(_stdout_reason(s))
    return found


def _data_order_reasons(report: dataorder.DataOrderReport | None) -> list[Reason]:
    """The data order first (it explains the rest), then the worker seeds."""
    found: list[Reason] = []
    d = report.order if report is not None else None
    if d is not None:
        fields = dataclasses.asdict(d)
        found.append(Reason(Code.DATA_ORDER_DIFFERS, dataorder.describe_order(d), fields=fields))
    s = report.worker_seeds if report is not None else None
    if s is not None:
        text = dataorder.describe_seeds(s)
        found.append(Reason(Code.WORKER_SEEDS_DIFFER, text, fields=dataclasses.asdict(s)))
    return found


def _stdout_reason(s: StdoutDivergence) -> Reason:
    fields = {"line": s.line, "original": s.original, "replay": s.replay, "field": s.field,
              "original_value": s.original_value, "replay_value": s.replay_value}  # fmt: skip
    if s.original_value is not None:
        name = f"{s.field} " if s.field else ""
        text = f"stdout differs at line {s.line}: {name}{s.original_value} -> {s.replay_value}"
    elif s.original is None or s.replay is None:
        text = f"stdout differs at line {s.line}: {s.original_lines} vs {s.replay_lines} lines"
    else:
        text = f"stdout differs at line {s.line}"
    return Reason(Code.LOG_DIFFERS, text, fields=fields)


def _output_reason(o: OutputDiff) -> Reason:
    if o.status == "missing":
        return Reason(Code.MISSING_OUTPUT, f"output {o.path} is missing from the replay", o.path)
    if o.status == "added":
        return Reason(Code.EXTRA_OUTPUT, f"output {o.path} appears only in the replay", o.path)
    if o.values is not None:
        return _values_reason(o)
    t = o.tensors
    if t is None:
        return Reason(Code.OUTPUT_DIFFERS, f"output {o.path} changed ({o.note or 'not compared'})", o.path)
    if t.only_original or t.only_replay:
        names = t.only_original + t.only_replay
        text = f"output {o.path}: tensor {names[0]} exists on one side only"
        return Reason(Code.TENSOR_DIFFERS, text, o.path, {"tensor": names[0], "kind": "only_one_side"})
    if t.mismatched:
        m = t.mismatched[0]
        text = f"output {o.path}: {m.name} {m.reason} {m.original} -> {m.replay}"
        return Reason(Code.TENSOR_DIFFERS, text, o.path, {"tensor": m.name, "kind": m.reason})
    worst = max(t.differing, key=lambda d: _nan_big(d.max_abs), default=None)
    if worst is None:
        return Reason(Code.OUTPUT_DIFFERS, f"output {o.path} changed bytes; all tensors equal", o.path)
    text = f"output {o.path}: tensor {worst.name} max abs {worst.max_abs:.3g}"
    return Reason(Code.TENSOR_DIFFERS, text, o.path, {"tensor": worst.name, "max_abs": worst.max_abs})


def _concurrent_reason(seen: Reason, shared: SharedWrite) -> Reason:
    """An output several processes wrote at once differs: that is why, whatever its bytes show."""
    if seen.code in (Code.MISSING_OUTPUT, Code.EXTRA_OUTPUT):
        return seen
    who = shared.writers()
    text = f"output {shared.path} was written by {who} at once: its bytes depend on which wrote last"
    fields = {"writers": who, "ranks": shared.ranks, "pids": shared.pids, "detail": seen.message}
    return Reason(Code.CONCURRENT_WRITE, text, shared.path, fields)


def _values_reason(o: OutputDiff) -> Reason:
    r = o.values
    assert r is not None
    if r.only_original or r.only_replay:
        name = (r.only_original or r.only_replay)[0]
        side = "original" if r.only_original else "replay"
        text = f"output {o.path}: {name} is only in the {side}"
        return Reason(Code.METRIC_DIFFERS, text, o.path, {"name": name, "kind": "only_one_side"})
    d = r.first
    assert d is not None
    at = f" at step {d.step}" if d.step is not None else ""
    text = f"output {o.path}: {d.name}{at}: {d.original!r} -> {d.replay!r}"
    fields = {"name": d.name, "step": d.step, "original": d.original, "replay": d.replay, "kind": "value"}
    return Reason(Code.METRIC_DIFFERS, text, o.path, fields)


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
        by_content = [o for o in v.outputs if o.values is not None or o.original_hash != o.replay_hash]
        formats = list(dict.fromkeys(o.kind for o in by_content if o.stamped))
        named = f": {', '.join(formats)}" if formats else ""
        how = f" ({len(by_content)} equal by content{named})" if by_content else ""
        logs = "stdout equal" if v.stdout_compared else "stdout not compared"
        outputs = f"{plural(n, 'output')} identical{how}" if n else "no outputs"
        return f"identical: {outputs}, metrics and {logs}"
    if v.status == "within_tolerance":
        parts = [f"{len(v.changed_outputs)} of {plural(n, 'output')}"] if v.changed_outputs else []
        parts += [name for name, part in (("metrics", v.metrics), ("stdout", v.stdout)) if part is not None]
        size = f"max abs difference {v.max_abs:.3g}" if v.max_abs is not None else "no value differs"
        return f"within tolerance: {', '.join(parts) or 'output bytes'} differ within tolerance; {size}"
    head = "failed" if v.status == "failed" else "diverged"
    if not v.reasons:
        return head
    more = f" (+{len(v.reasons) - 1} more)" if len(v.reasons) > 1 else ""
    return f"{head}: {v.reasons[0].message}{more}"


# --------------------------------------------------------------------------- stdout


def normalise_line(line: str) -> str:
    """A stdout line as compared: numbers that measure time masked (`repro.compare.logmask`)."""
    return mask_timings(line.rstrip())
