"""The row of the resume trace (``REPRO_RESUME_TRACE=1``) that decides one optimizer step, computed at
the least cost per step: what `repro check --interrupt` compares (repro/compare/resumetrace.py).

Every tensor of the step (each parameter, each optimizer-state tensor; the gradients together) is
read as a sum and ``bits``, which changes with any changed bit of one element. The contiguous CPU
float32 tensors — nearly all of them, for most training — are copied into one buffer kept from
step to step, through NumPy views made once (checked at every step: the same tensors, the same
storage), and reduced there per tensor in two calls for all (``np.add.reduceat``): the sums in
float32, the bits as the sum of the elements' 32-bit words modulo 2**32. Any other tensor is read by
`steptrace.fingerprints`. The per-tensor values go into the row as hex strings of their bytes
(``state``: ``sums``, ``bits``; no Python work per element), their state paths only when they
change (``paths``: the first row). Each RNG stream is fingerprinted from its raw bytes.

Standard library only; torch and NumPy are reached through the modules the script imported.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import weakref
from typing import Any

from repro.runtime import resumestate, steptrace

MAX_NAMED = 1024  # tensors a trace row holds by path (parameters first); the totals cover all
_WORDS = 1 << 64

_views = steptrace.Views()  # NumPy views of the tensors read by steptrace.fingerprints
_caches: dict[int, dict[str, Any]] = {}  # per optimizer: its state paths and its buffer
_written: list[Any] = [None]  # the paths the last row written named


def _cache_of(optimizer: Any) -> dict[str, Any]:
    cache = _caches.get(id(optimizer))
    if cache is None or cache["optimizer"]() is not optimizer:
        if len(_caches) >= 8:
            _caches.clear()
        cache = _caches[id(optimizer)] = {"optimizer": weakref.ref(optimizer), "key": None}
    return cache


def _tensors(torch: Any, optimizer: Any, cache: dict[str, Any]) -> tuple[list[Any], list[str], int]:
    """The step's parameters, then their optimizer-state tensors (the numbering of the optimizer's
    ``state_dict``), with their state paths (named again only when the state changes shape)."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    get, tensor = optimizer.state.get, torch.Tensor
    states = [get(p) or {} for p in params]
    tensors = list(params)
    for state in states:
        tensors.extend(value for value in state.values() if isinstance(value, tensor))
    shape = (len(tensors), [tuple(state) for state in states])
    if shape != cache.get("shape"):
        paths = [f"params[{i}]" for i in range(len(params))]
        for i, state in enumerate(states):
            paths += [f"optimizer.state[{i}].{k}" for k, v in state.items() if isinstance(v, tensor)]
        cache.update(shape=shape, paths=paths[:MAX_NAMED])
    return tensors, cache["paths"], len(params)


class _Flat:
    """The tensors of a step, read at every step: the contiguous CPU float32 ones through one float32
    buffer (and its 32-bit words), the others by `steptrace.fingerprints`."""

    def __init__(self, np: Any, torch: Any, tensors: list[Any]) -> None:
        self.np, self.count = np, len(tensors)
        fast = [
            i
            for i, t in enumerate(tensors)
            if t.device.type == "cpu" and t.dtype == torch.float32 and t.is_contiguous() and t.numel()
        ]
        taken = set(fast)
        self.rest = [i for i, t in enumerate(tensors) if i not in taken and t.numel()]
        self.index = np.array(fast, dtype=np.intp)
        self.views = [tensors[i].detach().numpy().reshape(-1) for i in fast]
        sizes = [v.size for v in self.views]
        self.offsets = np.cumsum([0, *sizes[:-1]], dtype=np.intp)
        self.buffer = np.empty(sum(sizes), dtype=np.float32)
        self.words = self.buffer.view(np.uint32)

    def read(self, torch: Any, tensors: list[Any]) -> tuple[Any, Any]:
        """Each tensor's sum and bits, two arrays in the tensors' order (an empty tensor's: 0, 0). The
        buffer is reduced per tensor in two calls for all, in its own types: float32 sums; bits as the
        sum of the 32-bit words modulo 2**32, which one changed bit changes."""
        np = self.np
        if self.views:
            np.concatenate(self.views, out=self.buffer)
            sums, bits = np.add.reduceat(self.buffer, self.offsets), np.add.reduceat(self.words, self.offsets)
            if self.index.size == self.count:
                return sums, bits
        sums_all, bits_all = np.zeros(self.count, dtype=np.float64), np.zeros(self.count, dtype=np.uint64)
        if self.views:
            sums_all[self.index], bits_all[self.index] = sums, bits
        if self.rest:
            with torch.no_grad():
                found = steptrace.fingerprints(torch, [tensors[i] for i in self.rest], _views)
            sums_all[self.rest] = [float(s) for s, _ in found]
            bits_all[self.rest] = [int(b) % _WORDS for _, b in found]
        return sums_all, bits_all


def _values(torch: Any, tensors: list[Any], cache: dict[str, Any]) -> tuple[Any, Any]:
    """Each tensor's sum and bits, through the buffer of the last step while the tensors are the same
    ones, on the same storage."""
    key = (list(map(id, tensors)), list(map(torch.Tensor.data_ptr, tensors)))
    if key != cache["key"]:
        cache.update(key=key, flat=_Flat(sys.modules["numpy"], torch, tensors))
    flat: _Flat = cache["flat"]
    return flat.read(torch, tensors)


def _total(np: Any, sums: Any, bits: Any) -> list[float | int]:
    """The tensors' sums added (float64) and their bits added modulo 2**64."""
    return [float(sums.sum(dtype=np.float64)), int(bits.sum(dtype=np.uint64))]


def tensors_row(optimizer: Any) -> dict[str, Any]:
    """``params`` and ``optimizer`` totals (``[sum, bits]``) and each tensor's values (``state``)."""
    torch, np = sys.modules["torch"], sys.modules.get("numpy")
    cache = _cache_of(optimizer)
    tensors, paths, n = _tensors(torch, optimizer, cache)
    if np is None:  # no NumPy: the totals alone, by torch
        return {"params": _by_torch(torch, tensors[:n]), "optimizer": _by_torch(torch, tensors[n:])}
    sums, bits = _values(torch, tensors, cache)
    row: dict[str, Any] = {
        "params": _total(np, sums[:n], bits[:n]),
        "optimizer": _total(np, sums[n:], bits[n:]),
    }
    state = {"sums": sums[:MAX_NAMED].tobytes().hex(), "bits": bits[:MAX_NAMED].tobytes().hex()}
    if paths is not _written[0]:  # the first row, and each that follows a change of the state's shape
        state["paths"], _written[0] = paths, paths
    row["state"] = state
    return row


def _by_torch(torch: Any, tensors: list[Any]) -> list[float | int]:
    with torch.no_grad():
        found = steptrace.fingerprints(torch, tensors, _views)
    return [float(sum(s for s, _ in found)), int(sum(int(b) for _, b in found) % _WORDS)]


def _flatten(torch: Any, tensors: list[Any]) -> Any:
    """The tensors' elements in one tensor: torch's own flattening (one C++ call, as DDP's buckets
    use), else a concatenation."""
    flatten = getattr(sys.modules.get("torch._utils"), "_flatten_dense_tensors", None)
    if flatten is not None:
        return flatten(tensors)
    return torch.cat([t.reshape(-1) for t in tensors])


def grads(optimizer: Any) -> list[float | int]:
    """``[sum, bits]`` of every gradient of the step together: one copy, two reductions."""
    torch, np = sys.modules["torch"], sys.modules.get("numpy")
    found = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    if np is None or not found:
        return _by_torch(torch, found)
    with torch.no_grad():
        try:
            flat = _flatten(torch, found)  # one copy into one tensor, in torch's C++ (as DDP's buckets)
        except (RuntimeError, TypeError):  # on several devices, or several types
            return _by_torch(torch, found)
        if flat.device.type != "cpu" or flat.dtype != torch.float32:
            return _by_torch(torch, [flat])
        values = flat.numpy()
    return [float(np.add.reduce(values)), int(np.add.reduce(values.view(np.uint32), dtype=np.uint64))]


def _digest(*parts: bytes) -> str:
    h = hashlib.blake2b(digest_size=8)
    for part in parts:
        h.update(part)
    return h.hexdigest()


def rng_fingerprints() -> dict[str, str]:
    """A fingerprint of each RNG stream of this process, from its raw state (by stream name)."""
    version, internal, gauss = random.getstate()
    # a tuple of ints hashes alike in every process (None does not before Python 3.12: by its address)
    out = {
        "python": _digest(hash(internal).to_bytes(8, "little", signed=True), repr((version, gauss)).encode())
    }
    np = sys.modules.get("numpy")
    if np is not None and hasattr(np, "random"):
        name, keys, pos, has_gauss, cached = np.random.get_state()
        out["numpy"] = _digest(keys.tobytes(), repr((name, int(pos), int(has_gauss), float(cached))).encode())
        generators = [g.bit_generator.state for g in resumestate.state["generators"]]
        out["numpy_generators"] = _digest(json.dumps(generators, sort_keys=True, default=str).encode())
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_rng_state"):
        out["torch"] = _digest(torch.default_generator.get_state().numpy().tobytes())
        cuda = getattr(torch, "cuda", None)
        if cuda is not None and cuda.is_initialized():  # nothing drew from a device before
            out["cuda"] = _digest(*(s.numpy().tobytes() for s in cuda.get_rng_state_all()))
    return dict(sorted(out.items()))
