"""Compare two runs' results: outputs, tensors, metric series and stdout → a Verdict.

Pure data in, pure data out: nothing here prints, and rendering lives in
``repro.ui.verdict``. numpy and torch are imported at call time, and only when a
tensor file has to be opened (torch only for ``.pt``/``.pth``/``.ckpt``/``.bin``).

Verdict rules (DESIGN.md, "Replay and verification"):

- the replay failed (non-zero exit, or status other than ``succeeded``) → ``failed``;
- ``strict`` mode: every output byte-identical, every metric value equal and stdout
  equal (timing tokens aside) → ``identical``, anything else → ``diverged``;
- ``gpu``/``off`` modes: all of the above → ``identical``; otherwise, when every
  differing output is a tensor file whose tensors have the same names, shapes and
  dtypes and values within tolerance, every metric value is within tolerance and
  stdout differs only in numbers within tolerance → ``within_tolerance``; anything
  else → ``diverged``.

A value ``b`` (replay) is within tolerance of ``a`` (original) when
``|a - b| <= atol + rtol * |a|`` (numpy's ``isclose`` with the original as reference);
NaN matches NaN and an infinity matches the same infinity.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.capsule import FileEntry
from repro.errors import ExitCode, ReproError, UsageError

MODES = ("strict", "gpu", "off")
STATUSES = ("identical", "within_tolerance", "diverged", "failed")
TENSOR_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".npy", ".npz")
_TORCH_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin")
_CHUNK = 1 << 22  # elements per chunk when scanning a tensor, bounds the float64 working set


class UnreadableTensorFile(ReproError):
    """A tensor file that cannot be parsed (malformed, unsupported, or needs unpickling code)."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot read tensors from {path.name}: {reason}")


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

    @property
    def failed(self) -> bool:
        return self.status != "succeeded" or (self.exit_code is not None and self.exit_code != 0)


@dataclass(frozen=True)
class Tolerance:
    """Absolute and relative tolerance: ``|a - b| <= atol + rtol * |a|``.

    The defaults are those of ``gpu`` mode (deterministic kernels, near-exact): float32
    carries about 7 significant digits, so a relative 1e-5 admits a few ulps of
    re-association (another GPU model, cuBLAS version or reduction order) while a real
    change — another seed, batch order or learning rate — moves weights by far more.
    """

    atol: float = 1e-6
    rtol: float = 1e-5

    def close(self, a: float, b: float) -> bool:
        """Whether ``b`` is within tolerance of the reference ``a``."""
        if a == b or (math.isnan(a) and math.isnan(b)):
            return True
        if not (math.isfinite(a) and math.isfinite(b)):
            return False
        return abs(a - b) <= self.atol + self.rtol * abs(a)


STRICT = Tolerance(atol=0.0, rtol=0.0)
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "strict": STRICT,
    # Deterministic kernels: only re-association noise is expected.
    "gpu": Tolerance(atol=1e-6, rtol=1e-5),
    # Seeds only: non-deterministic kernels (atomics in scatter/index_add, cuDNN
    # autotuning) let rounding noise compound over steps, so allow 100x more.
    "off": Tolerance(atol=1e-4, rtol=1e-3),
}


def tolerance_for(mode: str) -> Tolerance:
    """The default tolerance of a determinism mode.

    Raises:
        UsageError: an unknown mode.
    """
    _check_mode(mode)
    return DEFAULT_TOLERANCES[mode]


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise UsageError(f"unknown determinism mode {mode!r}; expected one of {', '.join(MODES)}")


# --------------------------------------------------------------------------- results


@dataclass
class TensorDiff:
    """One tensor present on both sides with the same shape and dtype but other values."""

    name: str
    shape: list[int]
    dtype: str
    max_abs: float
    max_rel: float
    differing: int  # elements that are not equal
    numel: int
    within_tolerance: bool


@dataclass
class TensorMismatch:
    """One entry present on both sides whose shape, dtype or (non-numeric) value differs."""

    name: str
    reason: str  # shape | dtype | value
    original: str
    replay: str


@dataclass
class TensorReport:
    """What differs between the tensors of two files."""

    compared: int = 0  # names present on both sides
    identical: int = 0
    differing: list[TensorDiff] = field(default_factory=list)
    mismatched: list[TensorMismatch] = field(default_factory=list)
    only_original: list[str] = field(default_factory=list)
    only_replay: list[str] = field(default_factory=list)
    max_abs: float | None = None
    max_rel: float | None = None

    @property
    def structural(self) -> bool:
        """Names, shapes, dtypes or non-numeric values differ."""
        return bool(self.mismatched or self.only_original or self.only_replay)

    @property
    def within_tolerance(self) -> bool:
        return not self.structural and all(d.within_tolerance for d in self.differing)


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
    max_abs: float | None = None
    summary: str = ""
    reasons: list[str] = field(default_factory=list)  # why diverged / failed, most decisive first
    notes: list[str] = field(default_factory=list)  # context callers add: data drift, backend change…

    @property
    def reproduced(self) -> bool:
        return self.status in ("identical", "within_tolerance")

    @property
    def exit_code(self) -> ExitCode:
        """The CLI exit code this verdict maps to (DESIGN.md, "Exit codes")."""
        if self.status == "failed":
            return ExitCode.COMMAND_FAILED
        return ExitCode.OK if self.reproduced else ExitCode.NOT_REPRODUCED

    @property
    def changed_outputs(self) -> list[OutputDiff]:
        return [o for o in self.outputs if o.status != "same"]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (non-finite floats become the strings "inf", "-inf", "nan")."""
        data = dataclasses.asdict(self)
        data["reproduced"] = self.reproduced
        return _json_safe(data)


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
    _check_mode(mode)
    tolerance = STRICT if mode == "strict" else (tol or DEFAULT_TOLERANCES[mode])
    outputs = _compare_outputs(original, replay, tolerance)
    metrics = compare_metrics(original.metrics, replay.metrics, tolerance)
    stdout = compare_stdout(original.stdout, replay.stdout, tolerance)
    verdict = Verdict(
        status="identical",
        mode=mode,
        original=original.label,
        replay=replay.label,
        tolerance=None if mode == "strict" else tolerance,
        outputs=outputs,
        metrics=metrics,
        stdout=stdout,
        max_abs=_largest(
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


def _largest(values: Sequence[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    if not found:
        return None
    return max(found, key=lambda v: math.inf if math.isnan(v) else v)


def _decide(v: Verdict, original: Side, replay: Side) -> str:
    if replay.failed:
        return "failed"
    if original.failed:
        return "diverged"  # the original failed and the replay did not: another result
    if all(o.status == "same" for o in v.outputs) and v.metrics is None and v.stdout is None:
        return "identical"
    if v.mode == "strict":
        return "diverged"
    if (
        all(o.within_tolerance for o in v.outputs)
        and (v.metrics is None or v.metrics.within_tolerance)
        and (v.stdout is None or v.stdout.within_tolerance)
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
        return compare_tensor_files(pa, pb, tol), None
    except UnreadableTensorFile as e:
        return None, f"unreadable: {e.reason}"


def is_tensor_file(path: str | Path) -> bool:
    """Whether a path names a file format whose tensors can be compared numerically."""
    return str(path).lower().endswith(TENSOR_SUFFIXES)


# --------------------------------------------------------------------------- tensors


@dataclass
class _Entry:
    """A loaded tensor (numpy array or torch tensor) or a plain value, with its dtype name."""

    value: Any
    dtype: str
    shape: tuple[int, ...]
    numeric: bool


def load_tensors(path: Path) -> dict[str, Any]:
    """Load the tensors of a .pt/.pth/.ckpt/.bin, .safetensors, .npy or .npz file by dotted name.

    Torch files are loaded with ``weights_only=True`` and nested dicts/lists flattened
    to dotted names (``model.fc.weight``, ``optimizer.param_groups.0.lr``); non-tensor
    leaves (numbers, strings) are kept as they are. Safetensors files are parsed
    directly into numpy arrays (bf16 and fp8 widened to float32 exactly). A ``.npy``
    file yields one entry, ``array``.

    Raises:
        UnreadableTensorFile: an unknown suffix, or a file that cannot be parsed.
    """
    return {name: e.value for name, e in _load(path).items()}


def _load(path: Path) -> dict[str, _Entry]:
    suffix = path.suffix.lower()
    try:
        if suffix in _TORCH_SUFFIXES:
            return _load_torch(path)
        if suffix == ".safetensors":
            return _load_safetensors(path)
        if suffix in (".npy", ".npz"):
            return _load_numpy(path)
    except UnreadableTensorFile:
        raise
    except Exception as e:  # OSError, ValueError, pickle.UnpicklingError from torch.load…
        raise UnreadableTensorFile(path, f"{type(e).__name__}: {_first_line(e)}") from e
    raise UnreadableTensorFile(path, f"unknown tensor file suffix {suffix!r}")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else ""


def _load_torch(path: Path) -> dict[str, _Entry]:
    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError:
        # Legacy (non-zip) serialisation cannot be memory-mapped.
        obj = torch.load(path, map_location="cpu", weights_only=True)
    found: dict[str, _Entry] = {}
    for name, leaf in _flatten(obj, ""):
        found[name] = _entry(leaf)
    return found


def _flatten(obj: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _flatten(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from _flatten(value, f"{prefix}.{i}" if prefix else str(i))
    else:
        yield prefix or "value", obj


def _entry(value: Any) -> _Entry:
    """Describe a torch tensor, numpy array or plain value."""
    mod = type(value).__module__
    if mod.startswith("torch") and hasattr(value, "dtype") and hasattr(value, "shape"):
        return _Entry(value, str(value.dtype).removeprefix("torch."), tuple(value.shape), True)
    if mod.startswith("numpy") and hasattr(value, "dtype"):
        numeric = value.dtype.kind in "biufc"
        return _Entry(value, value.dtype.name, tuple(getattr(value, "shape", ())), numeric)
    if isinstance(value, bool) or value is None or not isinstance(value, (int, float)):
        return _Entry(value, type(value).__name__, (), False)
    return _Entry(value, type(value).__name__, (), True)


_ST_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U64": "<u8",
    "U32": "<u4",
    "U16": "<u2",
    "U8": "u1",
    "BOOL": "?",
}
_ST_WIDENED = {"BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1}
_ST_NAMES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U64": "uint64",
    "U32": "uint32",
    "U16": "uint16",
    "U8": "uint8",
    "BOOL": "bool",
}
_ST_MAX_HEADER = 100 << 20


def _load_safetensors(path: Path) -> dict[str, _Entry]:
    import numpy as np

    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise UnreadableTensorFile(path, "shorter than the 8-byte header length")
        n = int.from_bytes(head, "little")
        if n > min(size - 8, _ST_MAX_HEADER):
            raise UnreadableTensorFile(path, f"header length {n} exceeds the file")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise UnreadableTensorFile(path, f"header is not JSON: {e}") from e
    if not isinstance(header, dict):
        raise UnreadableTensorFile(path, "header is not a JSON object")
    base = 8 + n
    raw = np.memmap(path, dtype=np.uint8, mode="r") if size > base else np.zeros(0, np.uint8)
    found: dict[str, _Entry] = {}
    for key, value in (header.get("__metadata__") or {}).items():
        found[f"__metadata__.{key}"] = _Entry(value, "str", (), False)
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (start, end) = info["dtype"], [int(d) for d in info["shape"]], info["data_offsets"]
        except (KeyError, TypeError, ValueError) as e:
            raise UnreadableTensorFile(path, f"tensor {name!r} has a malformed header entry") from e
        if dtype not in _ST_NAMES:
            raise UnreadableTensorFile(path, f"tensor {name!r} has unsupported dtype {dtype}")
        itemsize = _ST_WIDENED.get(dtype) or np.dtype(_ST_DTYPES[dtype]).itemsize
        count = math.prod(shape)
        if not (0 <= start <= end and base + end <= size and end - start == count * itemsize):
            raise UnreadableTensorFile(path, f"tensor {name!r} has data offsets that do not fit")
        buf = raw[base + start : base + end]
        if dtype in _ST_WIDENED:
            arr = _widen(buf, dtype)
        else:
            arr = buf.view(np.dtype(_ST_DTYPES[dtype]))
        found[name] = _Entry(arr.reshape(shape), _ST_NAMES[dtype], tuple(shape), True)
    return found


def _widen(buf: Any, dtype: str) -> Any:
    """Decode bf16/fp8 bytes to float32 exactly (numpy has no such dtypes)."""
    import numpy as np

    if dtype == "BF16":
        return (buf.view("<u2").astype(np.uint32) << 16).view(np.float32)
    return _fp8_table(dtype)[np.asarray(buf)]


def _fp8_table(dtype: str) -> Any:
    import numpy as np

    exp_bits, man_bits, bias = (4, 3, 7) if dtype == "F8_E4M3" else (5, 2, 15)
    table = np.empty(256, dtype=np.float32)
    for byte in range(256):
        sign = -1.0 if byte & 0x80 else 1.0
        exp = (byte >> man_bits) & ((1 << exp_bits) - 1)
        man = byte & ((1 << man_bits) - 1)
        if dtype == "F8_E4M3" and exp == 0xF and man == 0x7:
            value = math.nan  # e4m3fn: no infinities, one NaN pattern per sign
        elif dtype == "F8_E5M2" and exp == 0x1F:
            value = math.inf if man == 0 else math.nan
        elif exp == 0:
            value = man / (1 << man_bits) * 2.0 ** (1 - bias)
        else:
            value = (1 + man / (1 << man_bits)) * 2.0 ** (exp - bias)
        table[byte] = sign * value
    return table


def _load_numpy(path: Path) -> dict[str, _Entry]:
    import numpy as np

    if path.suffix.lower() == ".npy":
        return {"array": _entry(np.load(path, allow_pickle=False, mmap_mode="r"))}
    with np.load(path, allow_pickle=False) as npz:
        return {name: _entry(npz[name]) for name in npz.files}


def compare_tensor_files(a: Path, b: Path, tol: Tolerance) -> TensorReport:
    """Compare the tensors of two files by name: shapes, dtypes and values (a is the reference).

    Raises:
        UnreadableTensorFile: either file cannot be parsed.
    """
    ta, tb = _load(a), _load(b)
    return compare_tensors(ta, tb, tol)


def compare_tensors(ta: dict[str, Any], tb: dict[str, Any], tol: Tolerance) -> TensorReport:
    """Compare two name → tensor mappings (as ``load_tensors`` returns) with ``ta`` as reference."""
    report = TensorReport(
        only_original=[n for n in ta if n not in tb],
        only_replay=[n for n in tb if n not in ta],
    )
    for name, ea in ta.items():
        if name not in tb:
            continue
        ea, eb = _as_entry(ea), _as_entry(tb[name])
        report.compared += 1
        if not (ea.numeric and eb.numeric):
            if ea.dtype != eb.dtype or not _plain_equal(ea.value, eb.value):
                report.mismatched.append(TensorMismatch(name, "value", _short(ea.value), _short(eb.value)))
            else:
                report.identical += 1
            continue
        if ea.shape != eb.shape:
            report.mismatched.append(TensorMismatch(name, "shape", str(list(ea.shape)), str(list(eb.shape))))
            continue
        if ea.dtype != eb.dtype:
            report.mismatched.append(TensorMismatch(name, "dtype", ea.dtype, eb.dtype))
            continue
        diff = _diff_values(name, ea, eb, tol)
        if diff is None:
            report.identical += 1
        else:
            report.differing.append(diff)
    if report.differing:
        report.max_abs = _largest([d.max_abs for d in report.differing])
        report.max_rel = _largest([d.max_rel for d in report.differing])
    elif report.compared and not report.mismatched:
        report.max_abs = report.max_rel = 0.0
    return report


def _plain_equal(a: Any, b: Any) -> bool:
    if hasattr(a, "shape") and hasattr(b, "shape"):  # non-numeric arrays (strings, objects)
        import numpy as np

        return bool(np.array_equal(a, b))
    return bool(a == b)


def _as_entry(value: Any) -> _Entry:
    return value if isinstance(value, _Entry) else _entry(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _diff_values(name: str, ea: _Entry, eb: _Entry, tol: Tolerance) -> TensorDiff | None:
    """Scan two same-shape, same-dtype numeric values in chunks; None when equal."""
    import numpy as np

    numel = math.prod(ea.shape)
    differing = 0
    max_abs = max_rel = 0.0
    exceed = False
    for start in range(0, max(numel, 1), _CHUNK):
        stop = min(numel, start + _CHUNK)
        x, y = _chunk(ea.value, start, stop), _chunk(eb.value, start, stop)
        ne = x != y  # NaN != NaN: NaN positions are sorted out below, only where present
        if not ne.any():
            continue
        x, y = x[ne], y[ne]
        both_nan = np.isnan(x) & np.isnan(y)
        if both_nan.any():
            x, y = x[~both_nan], y[~both_nan]
            if not x.size:
                continue
        differing += int(x.size)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            delta = np.abs(x - y)
            delta[np.isnan(delta)] = np.inf  # NaN against a number, or opposite infinities
            ref = np.abs(x)
            rel = delta / ref  # inf where the reference is 0
            rel[np.isnan(rel)] = np.inf
            bad = ~(np.isfinite(delta) & (delta <= tol.atol + tol.rtol * ref))
        max_abs = max(max_abs, float(delta.max()))
        max_rel = max(max_rel, float(rel.max()))
        exceed = exceed or bool(bad.any())
    if not differing:
        return None
    return TensorDiff(
        name=name,
        shape=list(ea.shape),
        dtype=ea.dtype,
        max_abs=max_abs,
        max_rel=max_rel,
        differing=differing,
        numel=numel,
        within_tolerance=not exceed,
    )


_NUMPY_UNSAFE_TORCH = ("bfloat16", "float8", "complex32", "uint16", "uint32", "uint64")


def _chunk(value: Any, start: int, stop: int) -> Any:
    """Elements [start, stop) of a flattened value as float64 (complex128 for complex)."""
    import numpy as np

    if type(value).__module__.startswith("torch"):
        import torch

        t = value.detach()
        if t.is_quantized:
            t = t.dequantize()
        if t.layout != torch.strided:
            t = t.to_dense()
        flat = t.reshape(-1)[start:stop].cpu()
        if flat.is_complex():
            return flat.to(torch.complex128).numpy()
        return flat.to(torch.float64).numpy()
    arr = np.asarray(value).reshape(-1)[start:stop]
    if arr.dtype.kind == "c":
        return arr.astype(np.complex128)
    return arr.astype(np.float64)


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
        result.max_abs = _largest(deltas)
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
        result.max_abs = _largest(deltas)
    return result
