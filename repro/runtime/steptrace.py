"""`repro run --trace`, inside the training process: each parameter's fingerprint after every step.

Standard library only; torch is handed in. After every optimizer step one JSON line goes to
``trace.jsonl`` (``trace.rank<R>.jsonl`` for a torchrun rank): ``{"step": n, "f": 4, "params":
{name: [sum, bits]}}`` (repro/compare/trace.py reads it): ``bits`` is an exact digest of the
parameter's bytes, which any changed bit changes, taken at every step; ``sum`` the sum of its
values, which tolerances compare, taken at every step where a tolerance judges and, in strict
mode, at every `SUM_EVERY`-th step (0, 8, 16, ...) and ``null`` at the others (`sum_every`): a
second pass over every parameter, it cost as much as the digest.
Each is one pass over the parameter, with no copy: by NumPy through views kept from step to
step for CPU tensors, on the device for others, which come to the host in one transfer per step
(`fingerprints`). ``"f"`` names what an entry holds: ``3`` was a sum at every step, ``2`` (and
none, before it) ``[sum, sum of |x|]`` in float64, which the comparison still reads. A line is
the %-format of a template made once per parameter set (`_template`; ``json.dumps`` where a sum
is not finite). A step's numbers are kept as they are (`jsonl.Appender.write_later`) and written
out as lines in one loop outside the steps, at most every second or 64 KiB, at exit, and before
the runtime ends the process itself (`flush`); a SIGKILL loses at most that second.
"""

from __future__ import annotations

import gc
import importlib
import json
import math
import os
import struct
import sys
import warnings
import weakref
from pathlib import Path
from types import ModuleType
from typing import Any

from repro.runtime import contract, jsonl

SUMMATION = 4  # the row's "f": what each entry holds (repro/compare/trace.py); none before the second
SUM_EVERY = 8  # strict mode: a parameter's sum is taken at the steps this divides; its digest at every step
FLUSH_BYTES = 1 << 16
FLUSH_SECONDS = 1.0
NUMBER_BYTES = 24  # about what one fingerprint number takes in a line (for the appender's FLUSH_BYTES)

_appender: list[jsonl.Appender] = []  # the trace's, once installed
_Line = tuple[list[str], tuple[str, str] | None]  # a parameter set's names and templates (`_templates`)


def flush() -> None:
    """Write the kept rows (at exit, and before the runtime ends the process itself)."""
    for appender in _appender:
        appender.flush()


def _written_out(kept: tuple[int, _Line, list[Any], bool]) -> str:
    """A step's row as its line (the appender writes kept rows out in one loop, outside the steps):
    the template's %-format, or ``json.dumps`` where a sum is not finite."""
    step, (keys, templates), flat, sums = kept
    if templates is not None and not sums:
        return templates[1] % (step, *flat[1::2])
    if templates is not None and math.isfinite(sum(flat[::2])):
        return templates[0] % (step, *flat)
    values = [[flat[i], flat[i + 1]] for i in range(0, len(flat), 2)]
    return json.dumps({"step": step, "f": SUMMATION, "params": dict(zip(keys, values, strict=True))})


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
    flat = _flat(torch, tensors, views if views is not None else Views())
    return [[flat[i], flat[i + 1]] for i in range(0, len(flat), 2)]


def _flat(torch: ModuleType, tensors: list[Any], views: Views, sums: bool = True) -> list[Any]:
    """`fingerprints` as one flat list, ``[sum, bits, sum, bits, ...]``: what a trace line is made of;
    without ``sums``, each sum is None and only the digests are taken."""
    np = sys.modules.get("numpy")
    by_id = views.by_id
    reduce: Any = np.add.reduce if np is not None else None  # called only for a view NumPy made
    out: list[Any] = []
    rest: list[int] = []  # where a tensor NumPy does not read goes in ``out``
    for x in tensors:
        v = by_id.get(id(x))
        if v is None or v.key != (x.data_ptr(), x.numel()) or v.ref() is not x:
            v = views.add(np, torch, x) if np is not None else None
            if v is None:
                rest.append(len(out))
                out += (0.0, 0)
                continue
        bits = int(reduce(v.words))
        if v.tailed:
            bits = (bits + int.from_bytes(v.tail.tobytes(), "little")) % _WORDS
        out += (float(reduce(v.values)) if sums else None, bits)
    if rest:
        with torch.no_grad():
            found = _by_torch(torch, [tensors[i // 2] for i in rest], sums)
        for i, (total, bits) in zip(rest, found, strict=True):
            out[i], out[i + 1] = total, bits
    return out


def _by_torch(torch: ModuleType, tensors: list[Any], sums: bool = True) -> list[tuple[float | None, int]]:
    """[sum, bits] of tensors NumPy does not read, taken on their device, come to the host at once
    (the sums None without ``sums``)."""
    totals, words = [], []
    for x in tensors:
        if not x.is_floating_point():  # complex: as x.double() sees it (its real part)
            x = x.double()
        if sums:
            totals.append(x.sum(dtype=torch.float64).view(torch.int64))
        words.append(_words(torch, x))
    if len({w.device for w in words}) > 1:
        totals, words = [t.cpu() for t in totals], [w.cpu() for w in words]
    found = torch.stack(totals + words).cpu().tolist()
    n = len(totals)
    floats: list[float | None] = list(struct.unpack(f"<{n}d", struct.pack(f"<{n}q", *found[:n])))
    if not sums:
        floats = [None] * len(words)
    return [(total, bits % _WORDS) for total, bits in zip(floats, found[n:], strict=True)]


_WORDS = 1 << 64


class _HostView:
    """NumPy views of one contiguous CPU tensor: its values, its whole 64-bit words, its last bytes."""

    def __init__(self, np: Any, x: Any, ref: Any) -> None:
        self.ref, self.key = ref, (x.data_ptr(), x.numel())
        self.values = x.numpy().reshape(-1)
        raw = self.values.view(np.uint8)
        whole = raw.size - raw.size % 8
        self.words, self.tail = raw[:whole].view(np.uint64), raw[whole:]
        self.tailed = whole < raw.size


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


def _templates(keys: list[str]) -> tuple[str, str] | None:
    """A step's line as a %-format of the step and its flat fingerprints: with the sums, then with
    the digests alone; the text ``json.dumps`` gives the row when every sum is finite (a float's
    repr is its JSON). None where two names are alike (a dict keeps the last: json.dumps writes)."""
    if len(set(keys)) < len(keys):
        return None
    names = [json.dumps(key).replace("%", "%%") for key in keys]
    head = f'{{{{"step": %d, "f": {SUMMATION}, "params": {{{{{{}}}}}}}}}}'
    return (
        head.format(", ".join(f"{name}: [%r, %d]" for name in names)),
        head.format(", ".join(f"{name}: [null, %d]" for name in names)),
    )


def sum_every(environ: Any) -> int:
    """At which steps a parameter's sum is taken: every `SUM_EVERY`-th in strict mode, where the
    digests decide and the sums only say how far apart; at every step in a mode a tolerance judges
    (`gpu`, `off`), and in a process resumed from a checkpoint (a window's replay: its rows are
    renumbered)."""
    strict = environ.get(contract.MODE_ENV, contract.DEFAULT_MODE) == "strict"
    return SUM_EVERY if strict and not environ.get(contract.RESUMED_FROM_ENV) else 1


def install(torch: ModuleType, path: Path) -> Any:
    """Append each step's fingerprints to ``path`` after every optimizer step; returns the hook's handle."""
    import atexit

    appender = jsonl.Appender(
        "trace", path=str(path), flush_seconds=FLUSH_SECONDS, flush_bytes=FLUSH_BYTES, dumps=_written_out
    )
    _appender[:] = [appender]  # a forked child (a DataLoader worker) never writes the parent's lines
    atexit.register(flush)
    names: dict[int, str] = {}
    steps = [0]
    every = sum_every(os.environ)

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

    known: dict[tuple[int, ...], _Line] = {}  # by the ids in order
    views = Views()

    def hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        groups = optimizer.param_groups
        tensors = groups[0]["params"] if len(groups) == 1 else [p for g in groups for p in g["params"]]
        ids = tuple(map(id, tensors))
        line = known.get(ids)
        if line is None:
            if len(known) > 64:  # parameter sets that change every step: no cache
                known.clear()
            keys = [
                name_of(p, f"group{g}.param{i}")
                for g, group in enumerate(groups)
                for i, p in enumerate(group["params"])
            ]
            line = known[ids] = (keys, _templates(keys))
        step = steps[0]
        sums = step % every == 0
        flat = _flat(torch, tensors, views, sums)
        appender.write_later((step, line, flat, sums), NUMBER_BYTES * len(flat))
        steps[0] += 1

    return importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook(hook)
