"""`repro run --trace`, inside the training process: each parameter's fingerprint after every step.

Standard library only; torch is handed in. After every optimizer step one JSON line goes to
``trace.jsonl`` (``trace.rank<R>.jsonl`` for a torchrun rank): ``{"step": n, "f": 2, "params":
{name: [sum, sum of |x|]}}``, both in float64 (repro/compare/trace.py reads it). The sums are
reduced with float64 accumulation and no float64 copy of the parameter: by NumPy for CPU
tensors, on the device for others, which come to the host in one transfer per step
(`fingerprints`). The same parameters give the same bits every time; ``"f": 2`` names this
summation order (older traces, summed from a float64 copy by torch, have none; the comparison
allows for the rounding between the two). Lines are buffered (`repro.runtime.jsonl`) and written at most every
second or 64 KiB, at exit, and before the runtime ends the process itself (`flush`); a SIGKILL
loses at most that second.
"""

from __future__ import annotations

import gc
import importlib
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

from repro.runtime import jsonl

SUMMATION = 2  # the row's "f": how the sums are taken (repro/compare/trace.py); none before this
FLUSH_BYTES = 1 << 16
FLUSH_SECONDS = 1.0

_appender: list[jsonl.Appender] = []  # the trace's, once installed


def flush() -> None:
    """Write the buffered lines (at exit, and before the runtime ends the process itself)."""
    for appender in _appender:
        appender.flush()


def fingerprints(torch: ModuleType, tensors: list[Any]) -> list[list[float]]:
    """[sum, sum of |x|] of each tensor, accumulated in float64, with one host transfer for all.

    A CPU float32/float64 tensor is summed by NumPy (float64 accumulation over a small cast
    buffer, pairwise: no float64 copy of the tensor, as fast as torch's float32 sum); any other
    (a GPU's, bfloat16) by torch on its device with ``dtype=float64``, every sum stacked into one
    tensor that comes to the host at once.
    """
    np = sys.modules.get("numpy")
    f64 = torch.float64
    out: list[list[float] | None] = []
    on_device: list[Any] = []
    for x in tensors:
        x = x.detach()
        if np is not None and x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64):
            a = x.numpy()
            out.append([float(a.sum(dtype=np.float64)), float(np.abs(a).sum(dtype=np.float64))])
            continue
        if not x.is_floating_point():  # complex: as x.double() sees it (its real part)
            x = x.double()
        on_device += [torch.sum(x, dtype=f64), torch.sum(x.abs(), dtype=f64)]
        out.append(None)
    if on_device:
        if len({s.device for s in on_device}) > 1:
            on_device = [s.cpu() for s in on_device]
        flat = iter(torch.stack(on_device).tolist())
        out = [v if v is not None else [next(flat), next(flat)] for v in out]
    return [v for v in out if v is not None]


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

    def hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        keys, tensors = [], []
        for g, group in enumerate(optimizer.param_groups):
            for i, p in enumerate(group["params"]):
                keys.append(name_of(p, f"group{g}.param{i}"))
                tensors.append(p)
        with torch.no_grad():
            values = fingerprints(torch, tensors)
        row = {"step": steps[0], "f": SUMMATION, "params": dict(zip(keys, values, strict=True))}
        appender.write(row)
        steps[0] += 1

    return importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook(hook)
