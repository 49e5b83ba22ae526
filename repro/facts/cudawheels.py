"""Which CUDA a lock's torch is built for; a cuda lock whose torch is a CPU build is refused.

A CUDA build of torch says so in one of two ways: a local version (``torch==2.7.1+cu128``,
from the PyTorch wheel index), or, on PyPI and indexes that mirror it, a plain version whose
wheel depends on the ``nvidia-*`` CUDA runtime (``nvidia-cuda-runtime-cu12==12.8.90``, or for
CUDA 13 ``nvidia-cuda-runtime==13.0.48`` beside ``cuda-toolkit``). ``+cpu``, or a torch with no
CUDA runtime beside it, is a CPU build: an image from it has ``torch.version.cuda`` None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from repro.errors import BuildError
from repro.facts.lockfile import canonical_name

TORCH_FAMILY = ("torch", "torchvision", "torchaudio", "triton")
_LOCAL = re.compile(r"cu(\d+)(\d)$")  # cu128 → 12.8, cu130 → 13.0
_RUNTIME = re.compile(r"nvidia-cuda-runtime(?:-cu\d+)?$")
_REFUSED_HINT = (
    "set cuda.index to an index with CUDA wheels (default https://download.pytorch.org/whl/cu128), "
    "or pin a CUDA build (torch==X+cu128); then `repro lock --variant cuda --upgrade`"
)


@dataclass(frozen=True)
class CudaBuild:
    """What a lock says about CUDA: its version (``12.8``), and how that was read."""

    version: str
    evidence: str  # "torch==2.7.1+cu128" or "nvidia-cuda-runtime-cu12==12.8.90"


def _pins(requirements: list[str]) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in requirements:
        name, sep, version = line.partition("==")
        if sep:
            pins[canonical_name(name.strip())] = version.strip().split(";")[0].strip()
    return pins


def _from_local(version: str) -> str | None:
    """``12.8`` for a ``+cu128`` local version; ``cpu`` for ``+cpu``; None without one."""
    try:
        local = Version(version).local
    except InvalidVersion:
        return None
    if local is None:
        return None
    match = _LOCAL.fullmatch(local)
    return f"{match.group(1)}.{match.group(2)}" if match else local


def cuda_build(requirements: list[str]) -> CudaBuild | None:
    """The CUDA the lock's torch family is built for; None when the lock holds no torch package.

    ``requirements``: the lock's ``name==version`` pins.

    Raises:
        BuildError: a torch package is a CPU build (``+cpu``, or no CUDA runtime beside it), or two
            disagree on the CUDA version.
    """
    pins = _pins(requirements)
    family = {name: pins[name] for name in TORCH_FAMILY if name in pins}
    if not family:
        return None
    runtime = next(((n, v) for n, v in sorted(pins.items()) if _RUNTIME.fullmatch(n)), None)
    from_runtime = None
    if runtime is not None:
        try:
            release = Version(runtime[1]).release
            from_runtime = f"{release[0]}.{release[1]}" if len(release) >= 2 else None
        except InvalidVersion:
            from_runtime = None
    found: dict[str, CudaBuild] = {}
    for name, version in family.items():
        local = _from_local(version)
        if local is not None and local[0].isdigit():
            found[name] = CudaBuild(local, f"{name}=={version}")
        elif local is None and from_runtime is not None:
            found[name] = CudaBuild(from_runtime, f"{runtime[0]}=={runtime[1]}" if runtime else "")
        elif name in ("torch", "torchvision", "torchaudio"):
            raise BuildError(
                f"the cuda lock holds {name}=={version}, a CPU build (no CUDA runtime): "
                "an image from it would have no CUDA",
                hint=_REFUSED_HINT,
            )
    versions = {b.version for b in found.values()}
    if len(versions) > 1:
        shown = ", ".join(sorted(b.evidence for b in found.values()))
        raise BuildError(
            f"the cuda lock mixes CUDA versions: {shown}", hint="pin the torch packages to one CUDA build"
        )
    return found.get("torch") or next(iter(found.values()), None)


def cuda_in_cpu_lock(requirements: list[str]) -> str | None:
    """Why a CPU lock would build a CUDA-sized image (its torch pulls the CUDA libraries: an unpinned
    ``torch`` resolved from PyPI), with the pin that avoids it; None when it would not.

    ``requirements``: the lock's ``name==version`` pins.
    """
    pins = _pins(requirements)
    torch = pins.get("torch")
    nvidia = sorted(name for name in pins if name.startswith("nvidia-"))
    if torch is None or not nvidia or (_from_local(torch) or "").startswith("cpu"):
        return None
    public = torch.split("+")[0]
    return (
        f"the lock's torch {torch} is a CUDA build with {len(nvidia)} nvidia-* libraries (several GB) "
        f"for a CPU image: pin the CPU build, `torch=={public}+cpu` in the requirements with "
        "`--extra-index-url https://download.pytorch.org/whl/cpu`, then `repro lock`"
    )
