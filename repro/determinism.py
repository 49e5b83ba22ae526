"""Determinism modes: the environment and in-process knobs each mode sets (DETERMINISM.md)."""

from __future__ import annotations

import re
from typing import Any

from repro.capsule import DeterminismInfo

# ISA pin → (ATen dispatch, oneDNN max ISA, MKL CBWR branch, OpenBLAS core type)
ISA_PINS: dict[str, tuple[str, str, str, str]] = {
    "avx2": ("avx2", "AVX2", "AVX2", "Haswell"),
    "avx512": ("avx512", "AVX512_CORE", "AVX512", "SkylakeX"),
    "default": ("default", "SSE41", "COMPATIBLE", "Prescott"),
}

NCCL_PINS = {
    "NCCL_ALGO": "Ring",
    "NCCL_PROTO": "Simple",
    "NCCL_NVLS_ENABLE": "0",
    "NCCL_MIN_NCHANNELS": "4",
    "NCCL_MAX_NCHANNELS": "4",
}


# Every variable a mode may set, and the others repro itself passes through the record (`--trace`).
# A replayed record's `determinism.env` is filtered through this list: a capsule cannot set
# LD_PRELOAD, PYTHONSTARTUP or anything else in the process environment.
RECORD_ENV = frozenset(
    {
        "REPRO_MODE", "REPRO_THREADS", "REPRO_TRACE", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "MKL_DYNAMIC", "OMP_DYNAMIC", "ATEN_CPU_CAPABILITY",
        "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_CBWR", "OPENBLAS_CORETYPE", "CUDA_VISIBLE_DEVICES",
        "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE", *NCCL_PINS,
    }
)  # fmt: skip
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.,:=+-]{0,64}$")


def allowed_env(env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Split a recorded environment into what repro passes on and the names it drops
    (not on the list, or a value no mode writes)."""
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for name, value in env.items():
        if name in RECORD_ENV and isinstance(value, str) and _SAFE_VALUE.match(value):
            kept[name] = value
        else:
            dropped.append(name)
    return kept, sorted(dropped)


def resolve_isa(isa: str, cpu_flags: list[str]) -> str | None:
    """`auto` → the widest pin this CPU and every common CI host share (avx2), else `default`."""
    if isa == "none":
        return None
    if isa == "auto":
        return "avx2" if "avx2" in cpu_flags else "default"
    return isa


def plan(mode: str, threads: int, isa: str | None) -> DeterminismInfo:
    """The variables set before the interpreter starts and the knobs the runtime applies."""
    env: dict[str, str] = {"REPRO_MODE": mode}
    knobs: dict[str, Any] = {}
    if mode in ("strict", "gpu"):
        n = str(threads)
        env.update(
            {
                "REPRO_THREADS": n,
                "OMP_NUM_THREADS": n,
                "MKL_NUM_THREADS": n,
                "OPENBLAS_NUM_THREADS": n,
                "NUMEXPR_NUM_THREADS": n,
                "MKL_DYNAMIC": "FALSE",
                "OMP_DYNAMIC": "FALSE",
            }
        )
        if isa:
            aten, onednn, cbwr, coretype = ISA_PINS[isa]
            env.update(
                {
                    "ATEN_CPU_CAPABILITY": aten,
                    "ONEDNN_MAX_CPU_ISA": onednn,
                    "DNNL_MAX_CPU_ISA": onednn,
                    "MKL_CBWR": cbwr,
                    "OPENBLAS_CORETYPE": coretype,
                }
            )
        knobs = {
            "deterministic_algorithms": True,
            "threads": threads,
            "interop_threads": 1,
            "cudnn_deterministic": True,
            "cudnn_benchmark": False,
        }
    if mode == "strict":
        env["CUDA_VISIBLE_DEVICES"] = ""  # strict mode is CPU only: bit-for-bit needs it
        knobs["gpu_visible"] = False
    if mode == "gpu":
        env.update({"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "NVIDIA_TF32_OVERRIDE": "0", **NCCL_PINS})
        knobs.update({"tf32": False, "cublas_workspace": ":4096:8", "nccl": dict(NCCL_PINS)})
    return DeterminismInfo(
        mode=mode, threads=threads if mode != "off" else None, isa=isa if mode != "off" else None,
        knobs=knobs, env=env,
    )  # fmt: skip


def verifiable_mode(*records: DeterminismInfo) -> str:
    """The mode a comparison may hold runs to: the recorded one, or ``off`` when any of the runs
    ran without the runtime (nothing was seeded or pinned, so nothing strict can be promised)."""
    if any(r.applied is False for r in records):
        return "off"
    return records[0].mode if records else "strict"
