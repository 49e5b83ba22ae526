"""The lock variants: their names and folders, and how each is resolved from a requirements source.

Three variants come from the same source (see `resolution`): ``cpu`` for CPU images, a
function of the requirements, the index configuration and the platform only (whoever
compiles it, from whichever virtual environment, gets the same bytes; its torch must be
a CPU build); ``local`` for runs on the local backend, where every requirement the
interpreter has installed is held at its installed version so the lock describes what
runs; and ``cuda`` for ``--gpus`` images, resolved for the image's Python and platform
with the torch CUDA wheel index. A lock is reused while the hash of its inputs (the
source text, the variant's resolution) is unchanged.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from repro.errors import UsageError
from repro.facts.cudawheels import TORCH_FAMILY, cuda_build
from repro.facts.lockfile import canonical_name, logical_lines
from repro.store.hashing import hash_bytes
from repro.store.record import LOCK_VARIANTS, LockVariant
from repro.store.runs import STORE_DIR

if TYPE_CHECKING:
    from packaging.requirements import Requirement

LOCK_DIR = "lockfiles"
VARIANTS = LOCK_VARIANTS
LOCK_NAMES = {
    "cpu": "requirements.lock.txt",
    "cuda": "requirements-cuda.lock.txt",
    "local": "requirements-local.lock.txt",
}
LOCK_NAME = LOCK_NAMES["cpu"]
LOCAL_LOCK_DIR = f"{STORE_DIR}/locks"  # the local backend's lock: this environment's, kept out of git
# a project lockfile (uv.lock, …) in repro's hash-pinned form, for each variant's environment
PROJECT_LOCK_NAMES = {
    "cpu": "project.lock.txt",
    "cuda": "project-cuda.lock.txt",
    "local": "project-local.lock.txt",
}
IMAGE_PYTHON = "3.11"  # the Python of the bookworm base image
IMAGE_PLATFORM = "manylinux_2_28_x86_64"
CUDA_INDEX = "https://download.pytorch.org/whl/cu128"  # the default of the cuda.index setting


@dataclass(frozen=True)
class Resolution:
    """How one lock variant is resolved: for which Python and platform, from which extra index."""

    variant: str
    python: str  # "3.11"
    platform: str | None  # a pip platform tag; None: the host's
    index_url: str | None  # an extra index (the torch CUDA wheels); None: the host's pip configuration
    constraints: tuple[str, ...] = ()  # name==version the lock must keep (local: what is installed)
    torch_build: str | None = None  # "cpu": the lock's torch packages must be CPU builds (+cpu)

    def unresolvable_here(self) -> str | None:
        """Why this machine cannot resolve the lock, or None.

        pip-compile resolves for the interpreter that runs it (it takes no target platform), so
        a lock for the image's platform is compiled only where Python and platform match it.
        """
        if not self.platform:
            return None
        here = f"{sys.version_info.major}.{sys.version_info.minor}"
        if here != self.python or sys.platform != "linux" or platform.machine() != "x86_64":
            return (
                f"the {self.variant} lock is for Python {self.python} on {self.platform}; "
                f"this is Python {here} on {sys.platform} {platform.machine()}"
            )
        return None

    def key(self) -> str:
        return "\n".join(
            [self.variant, self.python, self.platform or f"{sys.platform}-{platform.machine()}",
             self.index_url or "", f"torch-build:{self.torch_build or ''}", *self.constraints]
        )  # fmt: skip


def installed_version(name: str) -> str | None:
    """The version of distribution ``name`` this interpreter imports (the first on its path), or
    None; only that distribution's metadata is read, not every installed one's."""
    from importlib import metadata  # 11 ms to import: only where a version is asked for

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def known_variant(variant: str) -> LockVariant:
    """``variant`` as one of the lock variants.

    Raises:
        UsageError: an unknown variant.
    """
    for known in VARIANTS:
        if variant == known:
            return known
    raise UsageError(f"unknown lock variant {variant!r}", hint=f"one of: {', '.join(VARIANTS)}")


def resolution(
    variant: str,
    source_text: str,
    installed: dict[str, str] | None = None,
    cuda_index: str | None = CUDA_INDEX,
) -> Resolution:
    """The resolution of ``variant`` for a requirements source.

    ``cpu`` (CPU images): the host's Python and platform and pip configuration, nothing
    else: the interpreter that runs repro plays no part; a torch package it names must
    resolve to a CPU build (``torch_build``). ``local`` (the local backend): the same, and
    each requirement the source names that is installed at a version it allows is held at
    that version. ``cuda``: the image's Python and platform, with ``cuda_index`` for the torch CUDA
    wheels when the source names a torch package; nothing is held (the host's CPU
    packages are not what runs on the GPU).

    Raises:
        UsageError: an unknown variant.
    """
    if variant == "cuda":
        wants_torch = any(n in TORCH_FAMILY for n in _requirements(source_text))
        return Resolution("cuda", IMAGE_PYTHON, IMAGE_PLATFORM, cuda_index if wants_torch else None)
    known_variant(variant)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    if variant == "cpu":
        wants_torch = any(n in TORCH_FAMILY for n in _requirements(source_text))
        return Resolution("cpu", python, None, None, (), "cpu" if wants_torch else None)
    version_of = installed.get if installed is not None else installed_version
    held = []
    for name, req in sorted(_requirements(source_text).items()):
        version = version_of(name)
        if version is not None and req.specifier.contains(version, prereleases=True):
            held.append(f"{name}=={version}")
    return Resolution("local", python, None, None, tuple(held))


def _requirements(text: str) -> dict[str, Requirement]:
    entries = [entry for entry in logical_lines(text) if not entry.startswith("-")]
    if not entries:
        return {}
    from packaging.requirements import InvalidRequirement, Requirement  # 15 ms: only with requirements

    found: dict[str, Requirement] = {}
    for entry in entries:
        try:
            req = Requirement(entry)
        except InvalidRequirement:
            continue
        found[canonical_name(req.name)] = req
    return found


def lock_path(root: Path, variant: str) -> Path:
    """Where the lock of ``variant`` lives: an image's in the project's `lockfiles/`, to be committed
    (it is the same for everyone); the local backend's, which holds this environment's installed
    versions, in the store (`.repro/locks/`), never committed."""
    if variant == "local":
        return root / LOCAL_LOCK_DIR / LOCK_NAMES[variant]
    return root / LOCK_DIR / LOCK_NAMES[variant]


def inputs_hash(text: str, how: Resolution) -> str:
    """What a lock depends on: the source text and how the variant is resolved."""
    return hash_bytes(f"{text}\n--\n{how.key()}".encode())


def cuda_version(variant: str, pins: list[str]) -> str | None:
    """A cuda lock's CUDA version (None: it holds no torch).

    Raises:
        BuildError: its torch is a CPU build.
    """
    if variant != "cuda":
        return None
    found = cuda_build(pins)
    return found.version if found else None
