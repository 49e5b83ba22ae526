"""`repro base-image`: a minimal Debian base image from packages, for engines with no registry.

debootstrap installs a minimal Debian (python3, python3-venv, and the C/C++ toolchain that
`torch.compile` needs: g++ and the Python headers) into a temporary directory, which is tarred
and imported into the engine as an image. Only the Debian package mirror has to be reachable; no
container registry is involved, and no package manager runs in a later image build: the
toolchain is pinned by the base image's id.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from repro.errors import BackendUnavailable, BuildError

DEFAULT_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_BASE_IMAGE = "repro-base:bookworm"  # the tag runs build FROM unless image.base names another
# g++ and the Python headers: Inductor compiles C++ kernels as Python extensions (CPU), Triton its
# launchers (GPU); without them `torch.compile` fails inside the container.
PACKAGES = ("python3", "python3-venv", "g++", "python3-dev")
IMAGE_CHANGES = [
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["python3"]',
]
PYTHON_LABEL = "org.repro.python"  # the base's python3 version: wheels are fetched for it
COMPILER_LABEL = "org.repro.compiler"  # the base's C++ compiler, "g++ 12.2.0" (its Debian package)
PACKAGES_LABEL = "org.repro.packages"  # the Debian packages asked for: a base made with fewer is remade
_COMPILER_PACKAGE = re.compile(r"g\+\+-(\d+)")
# Left out of the image: package caches and lists, logs, documentation.
_PRUNE = ("var/cache/apt/archives", "var/lib/apt/lists", "var/log", "usr/share/doc", "usr/share/man")


@dataclass
class BaseImage:
    """The base image `repro base-image` made."""

    id: str
    tag: str
    suite: str
    seconds: float


def rootless() -> bool:
    """Whether this process makes base images without root: mmdebstrap in a user namespace, imported
    into this user's rootless Podman."""
    return hasattr(os, "geteuid") and os.geteuid() != 0 and shutil.which("mmdebstrap") is not None


def check_prerequisites() -> str:
    """The debootstrap executable's path, if this process may run it.

    Raises:
        BackendUnavailable: not root, or debootstrap is not installed.
    """
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        raise BackendUnavailable(
            "making a base image needs root (debootstrap creates device files and owners), or mmdebstrap",
            hint='run it as root: `sudo "$(command -v repro)" base-image`, or install Debian\'s mmdebstrap '
            "to make one rootless (into your Podman storage)",
        )
    path = shutil.which("debootstrap")
    if path is None:
        raise BackendUnavailable(
            "debootstrap is not installed",
            hint="install it: `sudo apt-get install debootstrap`",
        )
    return path


def _run(argv: list[str], on_line: Callable[[str], None] | None, what: str) -> None:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    tail: list[str] = []
    with proc.stdout:
        for line in proc.stdout:
            tail = (tail + [line.rstrip()])[-20:]
            if on_line:
                on_line(line.rstrip())
    if proc.wait() != 0:
        raise BuildError(
            f"{what} failed (exit {proc.returncode}):\n" + "\n".join(tail),
            hint="check that the Debian mirror is reachable (--mirror or $REPRO_DEBIAN_MIRROR)",
        )


def bootstrap(root: Path, suite: str, mirror: str, on_line: Callable[[str], None] | None = None) -> None:
    """Install a minimal Debian ``suite`` with python3 and python3-venv into ``root``.

    Raises:
        BackendUnavailable: not root, or no debootstrap.
        BuildError: debootstrap failed.
    """
    debootstrap = check_prerequisites()
    argv = [debootstrap, "--variant=minbase", f"--include={','.join(PACKAGES)}", suite, str(root), mirror]
    _run(argv, on_line, "debootstrap")
    for rel in _PRUNE:
        target = root / rel
        if target.is_dir():
            for child in target.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)


def bootstrap_rootless(archive: Path, suite: str, mirror: str, on_line: Callable[[str], None] | None) -> Path:
    """``mmdebstrap --mode=unshare``: the same minimal Debian as `bootstrap`, made without root (owners
    and device files inside a user namespace) straight into the tar ``archive``; returns a directory
    beside it holding what `base_labels` reads (python3's link, dpkg's status).

    Raises:
        BuildError: mmdebstrap failed.
    """
    prune = " ".join(f'"$1"/{rel}/*' for rel in _PRUNE)
    argv = ["mmdebstrap", "--mode=unshare", "--variant=minbase", f"--include={','.join(PACKAGES)}",
            f"--customize-hook=rm -rf {prune}", suite, str(archive), mirror]  # fmt: skip
    _run(argv, on_line, "mmdebstrap")
    facts = archive.parent / "facts"
    wanted = {"./usr/bin/python3", "./var/lib/dpkg/status"}
    with tarfile.open(archive) as tar:
        for member in tar:
            if member.name not in wanted:
                continue
            dest = facts / member.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            if member.issym():
                os.symlink(member.linkname, dest)
            elif member.isreg() and (body := tar.extractfile(member)) is not None:
                dest.write_bytes(body.read())
    return facts


def compiler_version(root: Path) -> str | None:
    """``g++ 12.2.0``: the C++ compiler the root filesystem's dpkg database holds, or None."""
    try:
        text = (root / "var" / "lib" / "dpkg" / "status").read_text(errors="replace")
    except OSError:
        return None
    for block in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(" ")
        )
        name = fields.get("Package", "")
        if _COMPILER_PACKAGE.fullmatch(name) and "installed" in fields.get("Status", "").split():
            version = fields.get("Version", "").split(":")[-1].split("-")[0]
            return f"g++ {version}" if version else None
    return None


def base_labels(root: Path) -> list[str]:
    """The LABEL changes of a base made from ``root``: its Python, its compiler, the packages asked for."""
    labels = [f"LABEL {PACKAGES_LABEL}={','.join(PACKAGES)}"]
    version = python_version(root)
    if version:
        labels.append(f"LABEL {PYTHON_LABEL}={version}")
    compiler = compiler_version(root)
    if compiler:
        labels.append(f'LABEL {COMPILER_LABEL}="{compiler}"')
    return labels


def python_version(root: Path) -> str | None:
    """The ``X.Y`` version of the root filesystem's python3, from its symlink target."""
    try:
        target = os.readlink(root / "usr" / "bin" / "python3")
    except OSError:
        return None
    match = re.fullmatch(r"python(\d+\.\d+)", Path(target).name)
    return match.group(1) if match else None


ImportRootfs = Callable[[Path, str, list[str]], str]  # (archive, tag, changes) → image id


def make_base_image(
    import_rootfs: ImportRootfs,
    tag: str = DEFAULT_BASE_IMAGE,
    suite: str = DEFAULT_SUITE,
    mirror: str | None = None,
    on_line: Callable[[str], None] | None = None,
) -> BaseImage:
    """debootstrap a minimal Debian (without root: mmdebstrap), import it with ``import_rootfs`` as ``tag``
    and return its id.

    The engine is the caller's (`repro.backends.docker.build.import_rootfs`): this module makes the
    root filesystem and never talks to Docker itself.

    Raises:
        BackendUnavailable: not root and no mmdebstrap, no debootstrap, or no engine answers.
        BuildError: debootstrap, tar or the import failed.
    """
    start = time.monotonic()
    mirror = mirror or os.environ.get("REPRO_DEBIAN_MIRROR") or DEFAULT_MIRROR
    unprivileged = rootless()
    if not unprivileged:
        check_prerequisites()
    scratch = Path(os.environ.get("REPRO_TMPDIR") or tempfile.gettempdir())
    with tempfile.TemporaryDirectory(prefix="repro-base-", dir=scratch) as tmp:
        archive = Path(tmp) / "rootfs.tar"
        if unprivileged:
            root = bootstrap_rootless(archive, suite, mirror, on_line)
        else:
            root = Path(tmp) / "rootfs"
            root.mkdir()
            bootstrap(root, suite, mirror, on_line)
            _run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(archive), "."], on_line, "tar")
        if on_line:
            on_line(f"importing {archive.stat().st_size // (1 << 20)} MiB rootfs as {tag}")
        changes = [*IMAGE_CHANGES, *base_labels(root)]
        image_id = import_rootfs(archive, tag, changes)
    return BaseImage(id=image_id, tag=tag, suite=suite, seconds=time.monotonic() - start)
