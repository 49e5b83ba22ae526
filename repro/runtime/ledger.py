"""The ledger of nondeterministic ops, and the determinism state read back from torch.

Standard library only (torch is handed in). Every alert PyTorch raises for an op without a
deterministic kernel is counted per (op, user frame) and reported (repro.runtime.procreport):
the first few occurrences and then every power of two as they happen (a DataLoader worker
ends without atexit), the final count at exit. With the alerts made errors (strict and gpu
modes without ``--allow-nondeterministic-ops``) the error that ends the script is reported
as fatal, so the runner can name the op, the line and the opt-out.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType, ModuleType, TracebackType
from typing import Any

from repro.runtime import jsonl, procreport
from repro.runtime.seeding import user_frame

_NO_KERNEL = " does not have a deterministic implementation"
_DEFAULTS_TO = (
    ("cuDNN Attention defaults to a non-deterministic algorithm", "cudnn_attention_backward"),
    (
        "Memory Efficient attention defaults to a non-deterministic algorithm",
        "mem_efficient_attention_backward",
    ),
    ("Flash attention defaults to a non-deterministic algorithm", "flash_attention_backward"),
)
# Kernel packages whose nondeterminism torch.use_deterministic_algorithms does not govern.
KERNEL_PACKAGES = ("flash_attn", "transformer_engine", "xformers", "apex")

_counts: dict[tuple[str, str | None], dict[str, Any]] = {}
_step = {"n": 0, "counting": False}


def op_of(message: str) -> str | None:
    """The op a nondeterminism alert names, or None when the message is not such an alert."""
    for line in message.splitlines():  # a DataLoader worker's error arrives wrapped, further down
        if _NO_KERNEL in line:
            return line.split(_NO_KERNEL)[0].rpartition(": ")[2].strip() or None
        for text, op in _DEFAULTS_TO:
            if text in line:
                return op
    return None


def _rank() -> int:
    return jsonl.rank()


def note(op: str, frame: FrameType | None, fatal: bool = False) -> None:
    """Count one alert of ``op`` raised with ``frame`` on the stack."""
    where = user_frame(frame)
    entry = _counts.setdefault(
        (op, where),
        {"op": op, "where": where, "count": 0, "rank": max(_rank(), 0), "first_step": None},
    )
    entry["count"] += 1
    if entry["first_step"] is None and _step["counting"]:
        entry["first_step"] = _step["n"]
    n = entry["count"]
    if fatal or n <= 4 or n & (n - 1) == 0:
        procreport.emit("nd", **entry, pid=os.getpid(), fatal=fatal)


def flush() -> None:
    """Report the final counts (at exit)."""
    for entry in _counts.values():
        procreport.emit("nd", **entry, pid=os.getpid(), fatal=False)


def watch_warnings() -> None:
    """Count every nondeterminism warning, while showing it as the default filter would (once per line)."""
    original = warnings.showwarning
    shown: set[tuple[str, str, int]] = set()

    def showwarning(
        message: Any, category: Any, filename: str, lineno: int, *args: Any, **kwargs: Any
    ) -> None:
        op = op_of(str(message))
        if op is None:
            original(message, category, filename, lineno, *args, **kwargs)
            return
        note(op, sys._getframe(1))
        if (str(message), filename, lineno) not in shown:
            shown.add((str(message), filename, lineno))
            original(message, category, filename, lineno, *args, **kwargs)

    warnings.showwarning = showwarning
    warnings.filterwarnings("always", message=".*" + _NO_KERNEL)
    for text, _ in _DEFAULTS_TO:
        warnings.filterwarnings("always", message=".*" + text)


def watch_errors() -> None:
    """Report the nondeterminism error that ends the script (strict alerts raise RuntimeError)."""
    original = sys.excepthook

    def excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        op = op_of(str(value)) if isinstance(value, RuntimeError) else None
        if op is not None:
            frame = None
            while tb is not None:
                frame, tb = tb.tb_frame, tb.tb_next
            note(op, frame, fatal=True)
        original(kind, value, tb if tb is not None else value.__traceback__)

    sys.excepthook = excepthook


def count_steps(torch: ModuleType) -> None:
    """Count optimizer steps, so an alert names the first step it happened in (with --trace)."""

    def hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        _step["n"] += 1

    import importlib

    importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook(hook)
    _step["counting"] = True


def effective(torch: ModuleType) -> dict[str, Any]:
    """What torch's determinism switches are now, whoever set them."""
    backends = torch.backends
    reads: dict[str, Any] = {
        "deterministic_algorithms": lambda: torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": lambda: torch.is_deterministic_algorithms_warn_only_enabled(),
        "deterministic_debug_mode": lambda: torch.get_deterministic_debug_mode(),
        "fill_uninitialized_memory": lambda: torch.utils.deterministic.fill_uninitialized_memory,
        "cudnn_deterministic": lambda: backends.cudnn.deterministic,
        "cudnn_benchmark": lambda: backends.cudnn.benchmark,
        "cudnn_allow_tf32": lambda: backends.cudnn.allow_tf32,
        "matmul_allow_tf32": lambda: backends.cuda.matmul.allow_tf32,
        "float32_matmul_precision": lambda: torch.get_float32_matmul_precision(),
        "sdp_flash": lambda: backends.cuda.flash_sdp_enabled(),
        "sdp_mem_efficient": lambda: backends.cuda.mem_efficient_sdp_enabled(),
        "sdp_math": lambda: backends.cuda.math_sdp_enabled(),
        "sdp_cudnn": lambda: backends.cuda.cudnn_sdp_enabled(),
        "threads": lambda: torch.get_num_threads(),
    }
    found: dict[str, Any] = {}
    for name, read in reads.items():
        try:
            value = read()
        except Exception:
            continue
        found[name] = value if isinstance(value, (bool, int, float, str)) else str(value)
    kernels = sorted(name for name in KERNEL_PACKAGES if name in sys.modules)
    if kernels:
        found["kernel_packages"] = kernels
    return found


def changed(set_by_repro: dict[str, Any], found: dict[str, Any]) -> dict[str, Any]:
    """The switches the script changed after repro set them: {name: {"set": …, "found": …}}."""
    return {
        name: {"set": value, "found": found[name]}
        for name, value in set_by_repro.items()
        if name in found and found[name] != value
    }
