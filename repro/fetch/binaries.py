"""Build requirements as wheels: pip resolves them from the host's sources with ``--only-binary=:all:``.

A source distribution's build requirements are version ranges (``setuptools>=61``), not pins,
so pip chooses them; with ``--only-binary=:all:`` it takes wheels only, and installing or
downloading a wheel runs no code of the package. The wheels are handed to the build sandbox
(``repro.backends.sourcebuild``) and never installed on the host or into the image.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from repro.errors import BuildError

_TAIL = 6


def download_wheels(
    requirements: list[str], dest: Path, python_version: str | None, on_line: Callable[[str], None] | None
) -> list[Path]:
    """Wheels satisfying ``requirements`` and their dependencies, for Python ``python_version``
    (X.Y; default the host's), downloaded into ``dest``; the files there afterwards.

    Raises:
        BuildError: some requirement has no wheel on the host's sources.
    """
    dest.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--dest", str(dest),
            "--progress-bar", "off", "--disable-pip-version-check", "--no-input"]  # fmt: skip
    host = f"{sys.version_info.major}.{sys.version_info.minor}"
    if python_version and python_version != host:
        argv += ["--python-version", python_version]
    argv += ["--", *requirements]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    for line in proc.stdout.splitlines():
        if on_line and line.strip():
            on_line(line.rstrip())
    if proc.returncode != 0:
        errors = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip() and "is ignored" not in ln]
        last = errors[-1] if errors else f"pip exited {proc.returncode}"
        raise BuildError(
            f"no wheels for the build requirements {', '.join(requirements)}: {last}",
            hint="source distributions are built from wheels only; check the host's pip indexes "
            "(`pip config list`), or lock a release of the package that ships a wheel",
        )
    return sorted(p for p in dest.iterdir() if p.is_file() and p.name.endswith(".whl"))
