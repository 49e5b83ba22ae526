"""Determinism modes: the environment and in-process knobs each mode sets (README, "How it works")."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from repro.errors import UsageError
from repro.runtime import contract
from repro.store.record import DeterminismInfo, Record, RunWarning

# ISA pin → (ATen dispatch, oneDNN max ISA, MKL CBWR branch, OpenBLAS core type). README "CPU ISA pins".
# MKL's AVX2 and AVX512 branches are Intel's: on other vendors' CPUs MKL falls back to its own
# dispatch, so only its COMPATIBLE branch gives the same bits on Intel and AMD. `portable` keeps the
# AVX2 kernels of ATen, oneDNN and OpenBLAS and takes that branch, the pins meant to give the same
# float32 bits across CPU vendors (matmul, GELU, exp, sums agreed under an emulated Intel CPU; torch's
# CPU sqrt, and so Adam, did not), at the cost benchmarks/bench_isa_portable.py measures.
ISA_PINS: dict[str, tuple[str, str, str, str]] = {
    "avx2": ("avx2", "AVX2", "AVX2", "Haswell"),
    "avx512": ("avx512", "AVX512_CORE", "AVX512", "SkylakeX"),
    "portable": ("avx2", "AVX2", "COMPATIBLE", "Haswell"),
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
        contract.MODE_ENV, contract.THREADS_ENV, contract.TRACE_ENV, contract.OPS_ENV,
        contract.ALLOW_NONDETERMINISTIC_OPS_ENV, contract.LOADER_SEEDS_ENV, "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "MKL_DYNAMIC", "OMP_DYNAMIC", "ATEN_CPU_CAPABILITY",
        "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_CBWR", "OPENBLAS_CORETYPE", "CUDA_VISIBLE_DEVICES",
        "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE", *NCCL_PINS,
    }
)  # fmt: skip
# The runtime's torch switches (`contract.torch_switches`) a record lists among its knobs, in this order.
_RECORDED_SWITCHES = (
    "deterministic_algorithms",
    "threads",
    "interop_threads",
    "cudnn_deterministic",
    "cudnn_benchmark",
)
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


# SOURCE_DATE_EPOCH (reproducible-builds.org): seconds since 1970 that writers put in files instead of
# the time they write them. Years 1970..9999: a value past that breaks the tools that read it.
SOURCE_DATE_EPOCH = "SOURCE_DATE_EPOCH"
_MAX_EPOCH = 253402300799


def source_date_epoch(created: str, environ: Mapping[str, str]) -> int:
    """The clock a run's files carry: the user's ``SOURCE_DATE_EPOCH`` when set, else the run's start
    (``created``, ISO 8601), recorded so that its replays write the same dates."""
    given = environ.get(SOURCE_DATE_EPOCH, "").strip()
    if given.isdigit() and int(given) <= _MAX_EPOCH:
        return int(given)
    return int(datetime.fromisoformat(created).timestamp())


def clock_env(epoch: int | None) -> dict[str, str]:
    """``{"SOURCE_DATE_EPOCH": …}`` for a recorded value in range, else nothing (a record from before it
    was recorded, or a hostile one)."""
    if epoch is None or isinstance(epoch, bool) or not 0 <= epoch <= _MAX_EPOCH:
        return {}
    return {SOURCE_DATE_EPOCH: str(epoch)}


def run_environment(record: Record) -> dict[str, str]:
    """The path-free variables every process of the run gets (and an exported job script sets)."""
    env = dict(record.determinism.env)
    env.update(clock_env(record.determinism.source_date_epoch))
    env.update(
        {
            contract.RUN_ID_ENV: record.id,
            contract.SEED_ENV: str(record.seeds.master),
            "PYTHONHASHSEED": str(record.seeds.pythonhashseed),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def resolve_isa(isa: str, cpu_flags: list[str]) -> str | None:
    """`auto` → the widest pin this CPU and every common CI host share (avx2), else `default`."""
    if isa == "none":
        return None
    if isa == "auto":
        return "avx2" if "avx2" in cpu_flags else "default"
    return isa


def plan(
    mode: str, threads: int, isa: str | None, allow_nondeterministic_ops: bool = False
) -> DeterminismInfo:
    """The variables set before the interpreter starts and the knobs the runtime applies.

    In strict and gpu mode an op without a deterministic kernel is an error, unless
    ``allow_nondeterministic_ops`` makes it a warning (counted in the ledger either way).
    """
    env: dict[str, str] = {contract.MODE_ENV: mode}
    allow = allow_nondeterministic_ops and mode != "off"
    if allow:
        env[contract.ALLOW_NONDETERMINISTIC_OPS_ENV] = "1"
    knobs: dict[str, Any] = {}
    switches = contract.torch_switches(mode, threads, allow)
    if switches:
        n = str(threads)
        env.update(
            {
                contract.THREADS_ENV: n,
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
        knobs = {name: switches[name] for name in _RECORDED_SWITCHES}
        # DataLoader workers seeded by each batch's place: a mid-epoch resume continues their draws
        env[contract.LOADER_SEEDS_ENV] = "1"
    if mode == "strict":
        env["CUDA_VISIBLE_DEVICES"] = ""  # strict mode is CPU only: bit-for-bit needs it
        knobs["gpu_visible"] = False
    if mode == "gpu":
        env.update({"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "NVIDIA_TF32_OVERRIDE": "0", **NCCL_PINS})
        env["NVTE_ALLOW_NONDETERMINISTIC_ALGO"] = "0"  # Transformer Engine, outside torch's switch
        knobs.update({"tf32": False, "cublas_workspace": ":4096:8", "nccl": dict(NCCL_PINS)})
    if switches:
        knobs["deterministic_warn_only"] = switches["deterministic_warn_only"]
    return DeterminismInfo(
        mode=mode, threads=threads if mode != "off" else None, isa=isa if mode != "off" else None,
        knobs=knobs, env=env, allow_nondeterministic_ops=allow,
    )  # fmt: skip


_THREAD_VARIABLES = (contract.THREADS_ENV, "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                     "NUMEXPR_NUM_THREADS")  # fmt: skip


def with_threads(info: DeterminismInfo, threads: int) -> DeterminismInfo:
    """``info`` at another intra-op thread count: the recorded variables and the torch switch it pins
    (`plan`'s), everything else as recorded (`repro replay --threads`)."""
    env = dict(info.env)
    for name in _THREAD_VARIABLES:
        env[name] = str(threads)
    knobs = dict(info.knobs)
    if "threads" in knobs:
        knobs["threads"] = threads
    return dataclasses.replace(info, threads=threads, env=env, knobs=knobs)


def check_gpu_mode(mode: str, given: str | None, found: int, backend: str, source: str, here: bool) -> None:
    """gpu mode needs a GPU the run can touch: one given with --gpus, or on a backend that runs the
    command in place (``here``: the local backend) one this machine has (``found``: the GPUs nvidia-smi
    lists). A gpu-mode run without one would be recorded as a GPU run that never touched a GPU.

    Raises:
        UsageError: gpu mode with no GPU given or found (exit 2).
    """
    if mode != "gpu" or given:
        return
    if here and found:
        return
    if found:
        why = f"the {backend} backend gives a run GPUs only with --gpus"
    else:
        why = "none was given (--gpus) and this machine has none (nvidia-smi lists no GPU)"
    raise UsageError(
        f"gpu mode (from {source}) but the run gets no GPU: {why}",
        hint="give it GPUs with --gpus all (or N), or run on the CPU: --mode strict",
    )


def verifiable_mode(*records: DeterminismInfo) -> str:
    """The mode a comparison may hold runs to: the recorded one; ``off`` when any of the runs ran
    without the runtime (nothing was seeded or pinned); at most ``gpu`` (a tolerance, never bit for
    bit) when a run used nondeterministic ops it was allowed to."""
    if any(r.applied is False for r in records):
        return "off"
    mode = records[0].mode if records else contract.DEFAULT_MODE
    if mode == "strict" and any(r.allow_nondeterministic_ops and r.nondeterministic_ops for r in records):
        return "gpu"
    return mode


_NO_GPU = (
    "No CUDA GPUs are available",
    "Torch not compiled with CUDA",
    "Found no NVIDIA driver",
    "CUDA driver initialization failed",
    "no CUDA-capable device",
)


def explain_failure(
    det: DeterminismInfo, fatal: dict[str, Any] | None, stderr_tail: list[str]
) -> dict[str, Any] | None:
    """Why a run failed, when a determinism setting made it fail: {code, message, hint}."""
    if fatal is not None and fatal.get("op"):
        where = f" at {fatal['where']}" if fatal.get("where") else ""
        rank = f" (rank {fatal['rank']})" if (fatal.get("rank") or 0) > 0 else ""
        return {
            "code": "nondeterministic_op",
            "message": f"{fatal['op']}{where}{rank} has no deterministic kernel, and {det.mode} mode "
            "makes that an error",
            "hint": "use another op, or pass --allow-nondeterministic-ops (allow_nondeterministic_ops: true "
            "in repro.yaml) to run it and have it counted; the replay then cannot promise identical",
            "op": fatal["op"],
            "where": fatal.get("where"),
        }
    if det.mode == "strict" and any(text in line for line in stderr_tail for text in _NO_GPU):
        return {
            "code": "strict_hides_gpus",
            "message": "the script wanted a GPU, and strict mode hides every GPU (CPU only, bit for bit)",
            "hint": "repro run --mode gpu --gpus N …  (or make the script fall back to the CPU)",
        }
    return None


def state_warnings(det: DeterminismInfo) -> list[RunWarning]:
    """One line for each thing that undoes what the mode promises: knobs the script changed,
    kernel packages outside torch's deterministic switch, nondeterministic ops that ran."""
    found = []
    if det.changed_by_script:
        shown = ", ".join(
            f"{k} {v.get('found')} (repro set {v.get('set')})"
            for k, v in det.changed_by_script.items()
            if isinstance(v, dict)
        )
        found.append(
            RunWarning(
                "determinism_changed",
                f"the script changed determinism switches after repro set them: {shown}",
            )
        )
    kernels = det.effective.get("kernel_packages") or []
    if kernels:
        found.append(
            RunWarning(
                "kernel_packages",
                f"kernel packages outside PyTorch's deterministic switch were imported: {', '.join(kernels)} "
                "(their kernels may be nondeterministic whatever the mode)",
            )
        )
    if det.nondeterministic_ops and det.allow_nondeterministic_ops:
        found.append(
            RunWarning(
                "nondeterministic_ops",
                f"nondeterministic ops ran (allowed): {ledger_text(det.nondeterministic_ops)}",
            )
        )
    return found


def ledger_text(ops: list[dict[str, Any]], limit: int = 4) -> str:
    """``put_ ×3 at train.py:12, index_add_ ×1 (rank 1)``."""
    parts = []
    for e in ops[:limit]:
        where = f" at {e['where']}" if e.get("where") else ""
        rank = f" (rank {e['rank']})" if (e.get("rank") or 0) > 0 else ""
        parts.append(f"{e['op']} ×{e['count']}{where}{rank}")
    more = f" (+{len(ops) - limit} more)" if len(ops) > limit else ""
    return ", ".join(parts) + more


def expectation(det: DeterminismInfo) -> str | None:
    """What a replay of a run that used nondeterministic ops can promise, in one line (else None)."""
    if not det.nondeterministic_ops:
        return None
    return (
        f"the run used nondeterministic ops ({ledger_text(det.nondeterministic_ops)}): "
        "expect within_tolerance at best, not identical"
    )
