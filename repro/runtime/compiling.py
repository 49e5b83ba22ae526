"""`torch.compile` inside a run: private caches, reproducible Inductor settings, and what compiled.

Standard library only (torch is handed in). Inductor's and Triton's caches live in a directory of the
run's own, made at boot and removed at exit, so no warm cache of an earlier run or of the host decides
what a run computes. In a pinned mode (strict, gpu) Inductor never autotunes by timing: a
``torch.compile(mode="max-autotune")`` or an ``options={"max_autotune": True}`` gets those settings
turned off (noted, and said in one line by the runner), and Inductor's deterministic mode is on where
the torch version has it. The knobs a compiled run records: that it compiled, the Inductor settings
that decide the generated code, and the C++ compiler (`repro.runtime.contract.COMPILE_KNOBS`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from types import ModuleType
from typing import Any

from repro.runtime import contract, procreport

# Inductor options that pick kernels by timing them: turned off in a pinned mode.
AUTOTUNE = ("max_autotune", "max_autotune_gemm", "max_autotune_pointwise", "coordinate_descent_tuning")
# The Inductor settings that decide the generated code, as recorded.
RECORDED = (*AUTOTUNE, "deterministic", "fallback_random", "freezing", "cpp_wrapper", "force_disable_caches",
            "triton.cudagraphs", "cpp.simdlen")  # fmt: skip
CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")

_seen: dict[str, Any] = {"graphs": 0, "turned_off": set(), "patches": {}}


def private_caches() -> None:
    """Point Inductor's and Triton's caches at a fresh directory of this run (inherited by its
    processes), removed when the main process ends."""
    top = tempfile.mkdtemp(prefix="repro-compile-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(top, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(top, "triton")
    atexit.register(shutil.rmtree, top, True)


def install(torch: ModuleType, pinned: bool, knobs: dict[str, Any]) -> None:
    """Watch ``torch.compile``'s Inductor backend: count what it compiles, and in a pinned mode
    turn autotuning off and Inductor's deterministic mode on. Never raises into the script."""
    wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
    if wrapper is None or getattr(wrapper, "__repro_wrapped__", False):
        return
    original_init, original_call = wrapper.__init__, wrapper.__call__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        config = getattr(self, "config", None)
        if pinned and isinstance(config, dict):
            asked = sorted(key for key in AUTOTUNE if config.get(key))
            for key in asked:
                config[key] = False
            if asked:
                _seen["turned_off"].update(asked)
                knobs["inductor_autotune_turned_off"] = sorted(_seen["turned_off"])
        if isinstance(config, dict):
            _seen["patches"].update({k: v for k, v in config.items() if k in RECORDED})

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _seen["graphs"] == 0:
            _first_compile(torch, pinned, knobs)
        _seen["graphs"] += 1
        knobs["compiled"] = True
        return original_call(self, *args, **kwargs)

    wrapper.__init__ = __init__
    wrapper.__call__ = __call__
    wrapper.__repro_wrapped__ = True


def _first_compile(torch: ModuleType, pinned: bool, knobs: dict[str, Any]) -> None:
    """Before Inductor's first graph: the compiler it will call, and the pinned settings."""
    compiler = compiler_name()
    knobs["compiler"] = compiler_version(compiler) or contract.NO_COMPILER
    if pinned:
        try:
            import importlib

            config = importlib.import_module("torch._inductor.config")
            for key in AUTOTUNE:
                if getattr(config, key, False):
                    _seen["turned_off"].add(key)
                    knobs["inductor_autotune_turned_off"] = sorted(_seen["turned_off"])
                    setattr(config, key, False)
            if hasattr(config, "deterministic"):
                setattr(config, "deterministic", True)  # noqa: B010 (not every torch has it)
        except Exception as e:  # the user's program must still run; the runner reports it
            procreport.emit(
                "error", f"torch._inductor.config:{type(e).__name__}", where="inductor", error=str(e)[:300]
            )


def compiler_name() -> str:
    """The C++ compiler Inductor calls: $CXX, else g++ (``torch._inductor.config.cpp.cxx``)."""
    return os.environ.get("CXX") or "g++"


def compiler_version(name: str) -> str | None:
    """``g++ 12.2.0``, or None when ``name`` is not on PATH or does not answer."""
    path = shutil.which(name)
    if path is None:
        return None
    try:
        out = subprocess.run([path, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True,
                             timeout=10, check=False).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{os.path.basename(name)} {out}" if out else os.path.basename(name)


def record(knobs: dict[str, Any]) -> None:
    """Add the Inductor settings of a run that compiled to its knobs (at exit)."""
    if not _seen["graphs"]:
        return
    import sys

    config = sys.modules.get("torch._inductor.config")
    found: dict[str, Any] = {}
    for key in RECORDED:
        value: Any = config
        for part in key.split("."):
            value = getattr(value, part, None)
        if isinstance(value, (bool, int, float, str)) or value is None:
            found[key] = value
    found.update({k: v for k, v in _seen["patches"].items() if isinstance(v, (bool, int, float, str))})
    knobs.update({f"{contract.INDUCTOR_KNOB_PREFIX}{k}": v for k, v in sorted(found.items())})
