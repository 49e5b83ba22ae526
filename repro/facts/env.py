"""The environment: host, CPU, GPU and an allow-list of environment variables."""

from __future__ import annotations

import fnmatch
import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

from repro.facts.secrets import Redactor
from repro.store.record import EnvInfo

# ISA flags that decide which CPU kernels run.
ISA_FLAGS = (
    "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_int8", "amx_tile", "asimd", "sve",
)  # fmt: skip

ENV_ALLOW = (
    "LANG", "LC_ALL", "TZ", "OMP_*", "MKL_*", "OPENBLAS_*", "NUMEXPR_*", "KMP_*", "GOMP_*",
    "CUDA_*", "CUBLAS_*", "CUDNN_*", "NCCL_*", "NVIDIA_*", "TORCH_*", "PYTORCH_*", "ATEN_*",
    "ONEDNN_*", "DNNL_*", "PYTHONHASHSEED", "PYTHONOPTIMIZE", "HF_*", "TRANSFORMERS_*", "WANDB_*",
)  # fmt: skip


def cpu_info() -> tuple[str | None, list[str]]:
    """The CPU model and its ISA flags of interest (Linux /proc/cpuinfo)."""
    model: str | None = None
    flags: set[str] = set()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name":  # the kernel's name beats platform.processor()'s architecture
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    if model is None:  # no name from the kernel: the architecture (`uname -p`, a subprocess on Linux)
        model = platform.processor() or None
    return model, [f for f in ISA_FLAGS if f in flags]


def gpus() -> tuple[list[dict[str, Any]], str | None]:
    """Visible NVIDIA GPUs (model, memory) and the driver version, via nvidia-smi."""
    if not shutil.which("nvidia-smi"):
        return [], None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return [], None
    found: list[dict[str, Any]] = []
    driver = None
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 4:
            found.append({"index": int(parts[0]), "name": parts[1], "memory": parts[2]})
            driver = parts[3]
    return found, driver


def allowed_variables(
    environ: dict[str, str], redactor: Redactor, extra: tuple[str, ...] = ()
) -> tuple[dict[str, str], list[str]]:
    """Environment variables from the allow-list, secrets redacted."""
    patterns = (*ENV_ALLOW, *extra)
    picked = {k: v for k, v in sorted(environ.items()) if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
    return redactor.env(picked)


def host_env(redactor: Redactor, extra_allow: tuple[str, ...] = ()) -> tuple[EnvInfo, list[str]]:
    """Facts about this machine; the process-side facts are merged in after the run."""
    model, flags = cpu_info()
    found, driver = gpus()
    variables, hits = allowed_variables(dict(os.environ), redactor, extra_allow)
    info = EnvInfo(
        python=platform.python_version(),
        implementation=platform.python_implementation(),
        os=f"{platform.system()} {platform.release()}",
        machine=platform.machine(),
        hostname=socket.gethostname(),
        cpu_model=model,
        cpu_count=os.cpu_count(),
        cpu_flags=flags,
        gpus=found,
        driver=driver,
        variables=variables,
    )
    return info, hits
