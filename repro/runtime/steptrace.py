"""`repro run --trace`, inside the training process: each parameter's fingerprint after every step.

Standard library only; torch is handed in. After every optimizer step one JSON line goes to
``trace.jsonl`` (``trace.rank<R>.jsonl`` for a torchrun rank): ``{"step": n, "f": 3, "params":
{name: [sum, bits]}}`` (repro/compare/trace.py reads it): ``bits`` is an exact digest of the
parameter's bytes, which any changed bit changes; ``sum`` the sum of its values, which tolerances
compare. Both are taken in one pass each over the parameter, with no copy: by NumPy through
views kept from step to step for CPU tensors, on the device for others, which come to the
host in one transfer per step (`fingerprints`). ``"f"`` names what an entry holds: ``2`` (and
none, before it) was ``[sum, sum of |x|]`` in float64, which the comparison still reads. Lines are buffered
(`repro.runtime.jsonl`) and written at most every second or 64 KiB, at exit, and before the
runtime ends the process itself (`flush`); a SIGKILL loses at most that second.
"""

from __future__ import annotations

import gc
import importlib
import struct
import sys
import warnings
import weakref
from pathlib import Path
from types import ModuleType
from typing import Any

from repro.runtime import jsonl

SUMMATION = 3  # the row's "f": what each entry holds (repro/compare/trace.py); none before the second
FLUSH_BYTES = 1 << 16
FLUSH_SECONDS = 1.0

_appender: list[jsonl.Appender] = []  # the trace's, once installed


def flush() -> None:
    """Write the buffered lines (at exit, and before the runtime ends the process itself)."""
    for appender in _appender:
        appender.flush()


def fingerprints(
    torch: ModuleType, tensors: list[Any], views: Views | None = None
) -> list[list[float | int]]:
    """[sum, bits] of each tensor, with one host transfer for all on a device.

    ``bits`` is the sum, modulo 2**64, of the tensor's bytes read as little-endian 64-bit words
    (the last one zero-padded): a change of any bit of one element changes it, a one-ulp step of
    one weight included. ``sum`` is the float sum of the values (float32 accumulation below
    float64), for tolerances and people. A contiguous CPU float32/float64 tensor is read by NumPy
    through views of it (`Views`: made once, when given, and kept while the tensor lives), two
    reductions and no copy; any other (a GPU's, bfloat16) by torch on its device, every result
    stacked into one tensor that comes to the host at once.
    """
    np = sys.modules.get("numpy")
    views = views if views is not None else Views()
    host: list[list[float | int] | None] = []
    sums, words = [], []
    for x in tensors:
        v = views.by_id.get(id(x))
        if v is None or v.ref() is not x or v.key != (x.data_ptr(), x.numel()):
            v = views.add(np, torch, x) if np is not None else None
        if v is not None:
            bits = int(v.reduce(v.words))
            if v.tail.size:
                bits = (bits + int.from_bytes(v.tail.tobytes(), "little")) % _WORDS
            host.append([float(v.reduce(v.values)), bits])
            continue
        host.append(None)
        with torch.no_grad():
            if not x.is_floating_point():  # complex: as x.double() sees it (its real part)
                x = x.double()
            sums.append(x.sum(dtype=torch.float64))
            words.append(_words(torch, x))
    if sums:
        if len({s.device for s in sums}) > 1:
            sums, words = [s.cpu() for s in sums], [w.cpu() for w in words]
        found = torch.cat([torch.stack(sums).view(torch.int64), torch.stack(words)]).cpu().tolist()
        n = len(sums)
        floats = struct.unpack(f"<{n}d", struct.pack(f"<{n}q", *found[:n]))
        pairs = iter([total, bits % _WORDS] for total, bits in zip(floats, found[n:], strict=True))
        host = [v if v is not None else next(pairs) for v in host]
    return [v for v in host if v is not None]


_WORDS = 1 << 64


class _HostView:
    """NumPy views of one contiguous CPU tensor: its values, its whole 64-bit words, its last bytes."""

    def __init__(self, np: Any, x: Any, ref: Any) -> None:
        self.ref, self.key = ref, (x.data_ptr(), x.numel())
        self.values = x.numpy().reshape(-1)
        raw = self.values.view(np.uint8)
        whole = raw.size - raw.size % 8
        self.words, self.tail = raw[:whole].view(np.uint64), raw[whole:]
        self.reduce = np.add.reduce


class Views:
    """The NumPy views `fingerprints` reads CPU tensors through, by tensor, made at the first step
    and checked at every one (the same tensor, storage and size); a tensor's views go
    when the tensor does."""

    def __init__(self) -> None:
        self.by_id: dict[int, _HostView] = {}

    def add(self, np: Any, torch: ModuleType, x: Any) -> _HostView | None:
        """The views of a contiguous CPU float32/float64 tensor, made now; None for any other."""
        if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64) or not x.is_contiguous():
            return None
        key = id(x)

        def gone(ref: Any) -> None:
            if (v := self.by_id.get(key)) is not None and v.ref is ref:
                del self.by_id[key]

        try:
            ref = weakref.ref(x, gone)
        except TypeError:  # a tensor that takes no weak reference: read it by torch
            return None
        view = self.by_id[key] = _HostView(np, x.detach(), ref)
        return view


def _words(torch: ModuleType, x: Any) -> Any:
    """The 0-d int64 sum (wrapping: modulo 2**64) of a tensor's bytes as 64-bit words, on its device."""
    size = x.element_size()
    whole_rows = x.dim() and (x.shape[-1] * size) % 8 == 0 and (x.storage_offset() * size) % 8 == 0
    if whole_rows and x.is_contiguous():
        return x.view(torch.int64).sum()  # in place: the common case, a weight or an even bias
    raw = x.reshape(-1).contiguous().view(torch.uint8)
    pad = -raw.numel() % 8
    if pad or raw.storage_offset() % 8:
        raw = torch.cat([raw, raw.new_zeros(pad)])
    return raw.view(torch.int64).sum()


def install(torch: ModuleType, path: Path) -> Any:
    """Append each step's fingerprints to ``path`` after every optimizer step; returns the hook's handle."""
    import atexit

    appender = jsonl.Appender("trace", path=str(path), flush_seconds=FLUSH_SECONDS, flush_bytes=FLUSH_BYTES)
    _appender[:] = [appender]  # a forked child (a DataLoader worker) never writes the parent's lines
    atexit.register(flush)
    names: dict[int, str] = {}
    steps = [0]

    def name_of(param: Any, fallback: str) -> str:
        if not names:  # the first step: name parameters after the modules that hold them
            with warnings.catch_warnings():  # isinstance() on some of torch's objects warns
                warnings.simplefilter("ignore")
                for obj in gc.get_objects():
                    if isinstance(obj, torch.nn.Module):
                        for name, p in obj.named_parameters():
                            if len(name) > len(names.get(id(p), "")):
                                names[id(p)] = name
            names.setdefault(0, "")
        return names.get(id(param), fallback)

    known: dict[tuple[int, ...], list[str]] = {}  # the parameters' names, by their ids in order
    views = Views()

    def hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        tensors = [p for group in optimizer.param_groups for p in group["params"]]
        ids = tuple(map(id, tensors))
        keys = known.get(ids)
        if keys is None:
            if len(known) > 64:  # parameter sets that change every step: no cache
                known.clear()
            keys = known[ids] = [
                name_of(p, f"group{g}.param{i}")
                for g, group in enumerate(optimizer.param_groups)
                for i, p in enumerate(group["params"])
            ]
        with torch.no_grad():
            values = fingerprints(torch, tensors, views)
        row = {"step": steps[0], "f": SUMMATION, "params": dict(zip(keys, values, strict=True))}
        appender.write(row)
        steps[0] += 1

    return importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook(hook)
