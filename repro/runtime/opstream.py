"""The op stream: a fingerprint of every tensor op's output and inputs, for the first K optimizer steps.

Standard library only (torch is handed in). With ``REPRO_OPS=K`` the runtime enters a
``TorchDispatchMode`` once torch is imported and appends one row per aten op to
``ops.jsonl`` (``ops.rank<R>.jsonl`` under torchrun), in the order the process ran them:

  {"i": 12, "step": 0, "op": "aten::add.Tensor", "phase": "fwd", "module": "blocks.2",
   "where": "train.py:31", "node": null, "out": ["3f…"], "in": ["a1…", "09…"], "sum": 1.5}

- ``out``/``in``: a 64-bit digest of each output/input tensor (dtype, shape and bytes); "-"
  for something that is not a plain tensor. ``sum`` is the float64 sum of the first floating
  output, ``values`` its elements when it has at most `KEEP_VALUES` of them (a difference's size).
- ``module``: the innermost ``nn.Module`` running (global forward hooks); in the backward pass,
  the module whose forward created the autograd node being run (``node`` names it).
- ``where``: the first frame of the user's code on the stack (``repro.runtime.seeding.user_frame``).
- ``step``: optimizer steps completed before the op (the trace's numbering). After K steps the
  mode is left and the file closed; with ``REPRO_OPS_STOP=1`` the process then ends (exit 0).
- Left out: ops of other threads (a pin-memory thread) except the autograd engine's, the ops a
  DataLoader runs to hand over a batch (with workers, their count depends on timing), ``set_``.

CPU tensors are hashed from their bytes (BLAKE2b). CUDA tensors are reduced on the device to two
int64 words (a wrapping sum of the raw bits and of the bits times their position: integer sums
are exact whatever the reduction order) and copied to the host in one batch at the end of each
step, so the recording adds no host synchronisation per op. Only the process that booted the
runtime records (a forked DataLoader worker does not). The file is bounded (`MAX_BYTES`): a
stream that reaches it ends with a ``{"truncated": true}`` row.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import sys
import threading
from types import ModuleType
from typing import Any

from repro.runtime import contract, jsonl
from repro.runtime.seeding import user_frame

KEEP_VALUES = 64  # a floating output this small is kept whole in its row
MAX_BYTES = 256 * 1024 * 1024  # the most an op stream grows to, per process
_BUFFER_ROWS = 2048

_UNINITIALIZED = frozenset({"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided"})

_state: dict[str, Any] = {}


def steps_asked() -> int:
    """The optimizer steps to record (``REPRO_OPS``); 0: none."""
    text = os.environ.get(contract.OPS_ENV, "")
    return int(text) if text.isdigit() else 0


def install(torch: ModuleType) -> None:
    """Start recording in this process, if the run asked for it."""
    steps = steps_asked()
    directory = os.environ.get(contract.RUNTIME_DIR_ENV)
    if not steps or not directory or _state:
        return
    appender = jsonl.Appender(
        "ops", path=jsonl.stream_path("ops", directory), flush_rows=_BUFFER_ROWS, max_bytes=MAX_BYTES,
        truncated=lambda: {"truncated": True, "step": _state["step"]}, on_end=_stop, dumps=_dumps,
    )  # fmt: skip
    _state.update(
        torch=torch, steps=steps, appender=appender, pid=os.getpid(), thread=threading.get_ident(), step=0,
        index=0, pending=[], modules=[], names={}, mode=None, loader=0,
    )  # fmt: skip
    import atexit
    import importlib

    nn_module = importlib.import_module("torch.nn.modules.module")
    _state["handles"] = [
        nn_module.register_module_forward_pre_hook(_enter_module),
        nn_module.register_module_forward_hook(_leave_module),
    ]
    importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook(_after_step)
    loader = importlib.import_module("torch.utils.data.dataloader")
    _outside_stream(loader.DataLoader, "__iter__")
    _outside_stream(loader._BaseDataLoaderIter, "__next__")
    _state["pytree"] = importlib.import_module("torch.utils._pytree")
    _state["mode"] = _mode_class(torch)()
    _state["mode"].__enter__()
    atexit.register(_finish)


def _mode_class(torch: ModuleType) -> Any:
    import importlib

    dispatch = importlib.import_module("torch.utils._python_dispatch")
    pytree = importlib.import_module("torch.utils._pytree")
    current_node = torch._C._current_autograd_node

    class Recorder(dispatch.TorchDispatchMode):  # type: ignore[misc,name-defined]
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if os.getpid() != _state["pid"] or _state["mode"] is None or _skipped(func):
                return out
            node = current_node()
            if node is not None or (threading.get_ident() == _state["thread"] and not _state["loader"]):
                try:
                    _record(func, pytree.tree_leaves(out), pytree.tree_leaves((args, kwargs)), node)
                except Exception as e:  # the script must run on: the stream ends here, saying why
                    _give_up(e)
            return out

    return Recorder


def _outside_stream(owner: Any, attr: str) -> None:
    """Leave out the ops a DataLoader runs to hand over a batch: with workers, how many batches
    have arrived (each rebuilt as it comes) depends on timing. The batch itself is seen where the
    script uses it (the inputs of the ops it feeds)."""
    original = getattr(owner, attr)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        _state["loader"] += 1
        try:
            return original(*args, **kwargs)
        finally:
            _state["loader"] -= 1

    wrapped.__wrapped__ = original  # type: ignore[attr-defined]
    wrapped.__doc__ = original.__doc__
    setattr(owner, attr, wrapped)


def _skipped(func: Any) -> bool:
    """Ops that only point a tensor at memory another process filled (a DataLoader worker's batch,
    rebuilt when it arrives, in arrival order): what they hold is seen where it is used."""
    return str(getattr(func, "__name__", "")).split(".")[0] == "set_"


def _record(func: Any, outs: list[Any], ins: list[Any], node: Any) -> None:
    torch = _state["torch"]
    row: dict[str, Any] = {"i": _state["index"], "step": _state["step"], "op": _op_name(func)}
    _state["index"] += 1
    if node is not None:
        row["phase"], row["node"] = "bwd", node.name()
        row["module"] = node.metadata.get("repro_module") if hasattr(node, "metadata") else None
    else:
        modules = _state["modules"]
        row["phase"], row["node"] = "fwd", None
        row["module"] = modules[-1] if modules else None
    row["where"] = user_frame(sys._getframe(2))
    tensors_out = [t for t in outs if isinstance(t, torch.Tensor)]
    fresh = row["op"].split("::")[-1].split(".")[0] in _UNINITIALIZED  # its bytes are whatever memory held
    row["out"] = ["-" if fresh else _digest(t) for t in tensors_out]
    row["in"] = [_digest(t) for t in ins if isinstance(t, torch.Tensor)]
    first = next((t for t in tensors_out if t.is_floating_point() and t.layout == torch.strided), None)
    if first is not None and first.device.type == "cpu" and not fresh:
        with torch.no_grad():
            x = first.detach()
            row["sum"] = float(x.double().sum()) if x.numel() else 0.0
            if x.numel() <= KEEP_VALUES:
                row["values"] = [float(v) for v in x.double().flatten().tolist()]
    if _state["pending"] or any(isinstance(d, _Pending) for d in (*row["out"], *row["in"])):
        _state["pending"].append(row)  # behind a row still waiting for its device digests: in order
    else:
        _write(row)


class _Pending:
    """A device tensor's fingerprint, still on the device until the step ends."""

    def __init__(self, words: Any) -> None:
        self.words = words


def _digest(t: Any) -> Any:
    torch = _state["torch"]
    try:
        if t.layout != torch.strided or t.is_meta:
            return "-"
        x = t.detach()
        if x.device.type != "cpu":
            return _Pending(_device_words(torch, x))
        x = x.contiguous()
        h = hashlib.blake2b(f"{x.dtype}{tuple(x.shape)}".encode(), digest_size=8)
        n = x.numel() * x.element_size()
        if n:
            h.update((ctypes.c_char * n).from_address(x.data_ptr()))
        return h.hexdigest()
    except Exception:
        return "-"


_INT_OF_SIZE = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def _device_words(torch: ModuleType, x: Any) -> Any:
    """Two int64 words that change with any bit of ``x``, computed on its device."""
    with torch.no_grad():
        flat = x.contiguous().view(-1)
        if flat.dtype == torch.bool:
            flat = flat.view(torch.uint8)
        elif flat.is_complex():
            flat = torch.view_as_real(flat).reshape(-1)
        bits = flat.view(getattr(torch, _INT_OF_SIZE[flat.element_size()])).to(torch.int64)
        position = torch.arange(bits.numel(), device=bits.device, dtype=torch.int64) * 2654435761 + 1
        described = f"{x.dtype}{tuple(x.shape)}".encode()
        shape = int.from_bytes(hashlib.blake2b(described, digest_size=4).digest(), "little")
        return torch.stack([bits.sum() + shape, (bits * position).sum()])


def _resolve_pending() -> None:
    """Copy the step's device fingerprints to the host in one transfer and write their rows."""
    pending, _state["pending"] = _state["pending"], []
    if not pending:
        return
    torch = _state["torch"]
    words = [d.words for row in pending for d in (*row["out"], *row["in"]) if isinstance(d, _Pending)]
    host = torch.stack(words).cpu().tolist() if words else []
    k = 0
    for row in pending:
        for key in ("out", "in"):
            resolved = []
            for d in row[key]:
                if isinstance(d, _Pending):
                    resolved.append(f"{host[k][0] & 0xFFFFFFFFFFFFFFFF:016x}{host[k][1] & 0xFFFFFFFF:08x}")
                    k += 1
                else:
                    resolved.append(d)
            row[key] = resolved
        _write(row)


def _op_name(func: Any) -> str:
    name = str(getattr(func, "name", lambda: func)())
    return name if "::" in name else f"aten::{name}"


def _dumps(row: Any) -> str:
    return json.dumps(row, separators=(",", ":"))


def _write(row: dict[str, Any]) -> None:
    _state["appender"].write(row)


def _flush() -> None:
    _state["appender"].flush()


def _give_up(error: Exception) -> None:
    """End the stream with a ``truncated`` row naming the error, and record nothing more."""
    _state["pending"] = []
    _stop()
    _state["appender"].end({"truncated": True, "step": _state["step"], "error": repr(error)[:300]})


def _stop() -> None:
    """Leave the dispatch mode and drop the module hooks: nothing more is recorded."""
    mode, _state["mode"] = _state.get("mode"), None
    if mode is not None:
        try:
            mode.__exit__(None, None, None)
        except Exception:
            pass
    for handle in _state.get("handles", []):
        handle.remove()
    _state["handles"] = []


# --------------------------------------------------------------------------- modules and steps


def _enter_module(module: Any, args: Any) -> None:
    if _state["mode"] is None:
        return
    names = _state["names"]
    if id(module) not in names:
        for name, sub in module.named_modules():
            names.setdefault(id(sub), name or type(module).__name__)
    _state["modules"].append(names[id(module)])


def _leave_module(module: Any, args: Any, output: Any) -> None:
    if _state["mode"] is None or not _state["modules"]:
        return
    try:
        _name_nodes(output)
    except Exception as e:
        _give_up(e)


def _name_nodes(output: Any) -> None:
    """Name the autograd nodes a module's forward made after it (its backward ops are its)."""
    path = _state["modules"].pop()
    torch, pytree = _state["torch"], _state["pytree"]
    todo = [t.grad_fn for t in pytree.tree_leaves(output) if isinstance(t, torch.Tensor) and t.grad_fn]
    seen = 0
    while todo and seen < 100_000:  # the autograd nodes this module's forward made, not yet named
        node = todo.pop()
        seen += 1
        if node is None or "repro_module" in node.metadata:
            continue
        node.metadata["repro_module"] = path
        todo.extend(next_node for next_node, _ in node.next_functions)


def _after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    if os.getpid() != _state["pid"] or _state["mode"] is None:
        return
    _state["step"] += 1
    _resolve_pending()
    if _state["step"] >= _state["steps"]:
        _finish()
        if os.environ.get(contract.OPS_STOP_ENV) == "1":
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)


def _finish() -> None:
    if not _state or os.getpid() != _state["pid"]:
        return
    if _state["mode"] is not None:
        _resolve_pending()
        _stop()
    _flush()
