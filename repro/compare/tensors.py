"""Tensor files: load them by name and compare their tensors within a tolerance.

Reads ``.pt``/``.pth``/``.ckpt``/``.bin`` (torch, ``weights_only``), ``.safetensors``
(the ``safetensors`` library), ``.npy`` and ``.npz`` files into name → tensor mappings, and compares
two such mappings into a `TensorReport` (pure data). numpy and torch are imported at
call time, and only when a tensor file has to be opened (torch only for torch files).
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from repro.compare import rootpath
from repro.compare.tolerance import Tolerance, largest
from repro.compare.unpicklers import UNPICKLERS as _UNPICKLERS  # the sandbox's, registered by the CLI
from repro.errors import ReproError, SandboxUnavailable
from repro.units import shorten, without_terminal_codes

TENSOR_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".npy", ".npz")
_TORCH_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin")
_CHUNK = 1 << 22  # elements per chunk when scanning a tensor, bounds the float64 working set


class UnreadableTensorFile(ReproError):
    """A tensor file that cannot be parsed (malformed, unsupported, or needs unpickling code)."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot read tensors from {path.name}: {reason}")


class NeedsUnpickling(UnreadableTensorFile):
    """A torch file ``weights_only`` refuses: loading it runs the code its pickle names."""


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


MismatchReason = Literal["shape", "dtype", "value"]


@dataclass
class TensorMismatch:
    """One entry present on both sides whose shape, dtype or (non-numeric) value differs."""

    name: str
    reason: MismatchReason
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
    rooted: int = 0  # names and string values that held a run's project root, compared relative to it

    @property
    def equal(self) -> bool:
        """Every name, shape, dtype and value equal (each tensor bit for bit)."""
        return not self.structural and not self.differing and self.identical == self.compared

    @property
    def structural(self) -> bool:
        """Names, shapes, dtypes or non-numeric values differ."""
        return bool(self.mismatched or self.only_original or self.only_replay)

    @property
    def within_tolerance(self) -> bool:
        return not self.structural and all(d.within_tolerance for d in self.differing)


def is_tensor_file(path: str | Path) -> bool:
    """Whether a path names a file format whose tensors can be compared numerically."""
    return str(path).lower().endswith(TENSOR_SUFFIXES)


# --------------------------------------------------------------------------- loading


@dataclass
class _Entry:
    """A loaded tensor (numpy array or torch tensor) or a plain value, with its dtype name."""

    value: Any
    dtype: str
    shape: tuple[int, ...]
    numeric: bool


def load_tensors(path: Path, suffix: str | None = None) -> dict[str, Any]:
    """Load the tensors of a .pt/.pth/.ckpt/.bin, .safetensors, .npy or .npz file by dotted name.

    Torch files are loaded with ``weights_only=True`` and nested dicts/lists flattened
    to dotted names (``model.fc.weight``, ``optimizer.param_groups.0.lr``); non-tensor
    leaves (numbers, strings) are kept as they are. Safetensors files are read with the
    ``safetensors`` library into numpy arrays (bf16 and fp8 through torch, widened to
    float32 exactly); their metadata as ``__metadata__.<key>`` strings. A ``.npy``
    file yields one entry, ``array``. ``suffix`` names the format when the file's own
    name has none (a content-addressed blob).

    Raises:
        UnreadableTensorFile: an unknown suffix, or a file that cannot be parsed.
    """
    return {name: e.value for name, e in _load(path, suffix).items()}


def _load(path: Path, suffix: str | None = None) -> dict[str, _Entry]:
    suffix = (suffix or path.suffix).lower()
    try:
        if suffix in _TORCH_SUFFIXES:
            return _load_torch(path)
        if suffix == ".safetensors":
            return _load_safetensors(path)
        if suffix in (".npy", ".npz"):
            return _load_numpy(path, suffix)
    except UnreadableTensorFile:
        raise
    except Exception as e:  # OSError, ValueError, pickle.UnpicklingError from torch.load…
        if type(e).__name__ == "UnpicklingError" and "weights only load failed" in str(e).lower():
            raise NeedsUnpickling(path, "it needs weights_only=False, and unpickling runs its code") from e
        raise UnreadableTensorFile(path, f"{type(e).__name__}: {_first_line(e)}") from e
    raise UnreadableTensorFile(path, f"unknown tensor file suffix {suffix!r}")


def _first_line(e: BaseException) -> str:
    text = without_terminal_codes(str(e)).strip().splitlines()  # torch bolds parts of its messages
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


# Dtypes numpy lacks: read through torch and widened to float32, which holds them exactly.
_ST_WIDENED = {"BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}


def _load_safetensors(path: Path) -> dict[str, _Entry]:
    from safetensors import safe_open

    found: dict[str, _Entry] = {}
    wide: list[tuple[str, str]] = []
    with safe_open(str(path), framework="np") as f:
        for key, value in (f.metadata() or {}).items():
            found[f"__metadata__.{key}"] = _Entry(value, "str", (), False)
        for name in f.keys():
            dtype = f.get_slice(name).get_dtype()
            if dtype in _ST_WIDENED:
                wide.append((name, dtype))
            else:
                found[name] = _entry(f.get_tensor(name))
    if wide:
        with safe_open(str(path), framework="pt") as f:
            for name, dtype in wide:
                t = f.get_tensor(name)
                found[name] = _Entry(t.float().numpy(), _ST_WIDENED[dtype], tuple(t.shape), True)
    return found


def _load_numpy(path: Path, suffix: str) -> dict[str, _Entry]:
    import numpy as np

    if suffix == ".npy":
        return {"array": _entry(np.load(path, allow_pickle=False, mmap_mode="r"))}
    with np.load(path, allow_pickle=False) as npz:
        return {name: _entry(npz[name]) for name in npz.files}


# --------------------------------------------------------------------------- comparison


def compare_tensor_files(
    a: Path,
    b: Path,
    tol: Tolerance,
    suffix: str | None = None,
    roots: tuple[str | None, str | None] = (None, None),
    images: Sequence[str] = (),
) -> TensorReport:
    """Compare the tensors of two files by name: shapes, dtypes and values (a is the reference).

    ``suffix`` names the format when the files' own names carry none (blobs). ``roots`` are the
    project roots the two runs saw: a path under one, in a name or a string value (a Lightning
    checkpoint's ``best_model_path``), is compared relative to it (`repro.compare.rootpath`).
    A torch pickle that needs ``weights_only=False`` is loaded only by a registered unpickler (the
    container sandbox, in ``images``, the runs' own first), never in this process.

    Raises:
        UnreadableTensorFile: either file cannot be parsed. NeedsUnpickling: they need unpickling and
            no sandbox could (its reason says the files were compared by bytes, and why).
    """
    try:
        loaded_a, loaded_b = _load(a, suffix), _load(b, suffix)
    except NeedsUnpickling as e:
        loaded_a, loaded_b = _unpickled(e, a, b, images)
    ta, rooted_a = _relative(loaded_a, rootpath.spellings(roots[0]))
    tb, rooted_b = _relative(loaded_b, rootpath.spellings(roots[1]))
    report = compare_tensors(ta, tb, tol)
    report.rooted = rooted_a + rooted_b
    return report


def _unpickled(
    refused: NeedsUnpickling, a: Path, b: Path, images: Sequence[str]
) -> tuple[dict[str, _Entry], dict[str, _Entry]]:
    """Both files loaded in the sandbox, as plain tensors this process reads with weights_only.

    Raises:
        UnreadableTensorFile: no unpickler registered, or the sandbox could not load them.
    """
    why = SandboxUnavailable.NO_ENGINE
    for unpickler in _UNPICKLERS:
        try:
            plain_a, plain_b = unpickler(a, b, images)
            try:
                return _load_torch(plain_a), _load_torch(plain_b)
            finally:  # the unpickler's scratch directory; loaded tensors outlive their file
                shutil.rmtree(plain_a.parent, ignore_errors=True)
        except SandboxUnavailable as e:
            why = e.reason
        except Exception as e:  # what the sandbox wrote is untrusted: unreadable is an answer
            why = f"its sandboxed copy is unreadable ({type(e).__name__}: {_first_line(e)})"
    raise NeedsUnpickling(refused.path, f"compared by bytes: {refused.reason}; {why}") from refused


def _relative(found: dict[str, _Entry], roots: tuple[str, ...]) -> tuple[dict[str, _Entry], int]:
    """Names and string values with the run's project root written ``<project>``; how many held it."""
    if not roots:
        return found, 0
    out: dict[str, _Entry] = {}
    rooted = 0
    for name, entry in found.items():
        key = rootpath.relative(name, roots)
        value = rootpath.relative(entry.value, roots) if isinstance(entry.value, str) else entry.value
        rooted += key != name or value is not entry.value and value != entry.value
        out[key] = _Entry(value, entry.dtype, entry.shape, entry.numeric)
    return out, rooted


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
        report.max_abs = largest([d.max_abs for d in report.differing])
        report.max_rel = largest([d.max_rel for d in report.differing])
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
    return shorten(text, 60)


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
