"""Compiling a lock with pip-compile (`--generate-hashes`), streaming its output line by line, and
refusing a result whose torch build does not fit the variant; a full disk is named with where to look.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from repro.errors import BuildError, OSFailure, from_os_error
from repro.facts.lockfile import pin_list
from repro.facts.lockvariants import Resolution, cuda_version
from repro.store import atomic

OnLine = Callable[[str], None]
# Asks an index whether it answers, raising IndexUnreachable in seconds where pip would retry for
# minutes: `repro.fetch.reach.check_reachable`, handed in by whoever compiles a lock.
Probe = Callable[[str], None]
COMPILE_HINT = "check the requirements; the packages must be installable for this Python"


_CPU_BUILT = ("torch", "torchvision", "torchaudio")  # the packages with a +cpu build
CPU_INDEX_HINT = (
    "add the CPU wheel index to the requirements (a line `--extra-index-url "
    "https://download.pytorch.org/whl/cpu`), or pin the build: torch==VERSION+cpu"
)


def _cpu_build(how: Resolution, pins: list[str]) -> None:
    """Refuse a CPU image lock whose torch packages are not CPU builds (the index configuration
    offered only CUDA ones: the image would carry gigabytes of CUDA for nothing).

    Raises:
        BuildError: a torch package without the ``+cpu`` local version.
    """
    if how.torch_build != "cpu":
        return
    other = [p for p in pins if p.split("==")[0] in _CPU_BUILT and not p.endswith("+cpu")]
    if other:
        raise BuildError(
            f"the cpu lock must hold CPU builds of torch; the index configuration gave {', '.join(other)}",
            hint=CPU_INDEX_HINT,
        )


def compile_lock(
    text: str,
    how: Resolution,
    dest: Path,
    on_line: OnLine | None,
    previous: str | None = None,
    upgrade: list[str] | None = None,
    *,
    reachable: Probe,
) -> None:
    """Compile ``text`` into the lock ``dest`` for ``how``, asking its index first (``reachable``).

    Raises:
        BuildError: not compilable here; pip-compile failed; a torch build that does not fit.
        IndexUnreachable: the index does not answer. OSFailure: the disk is full.
    """
    elsewhere = how.unresolvable_here()
    if elsewhere:
        raise BuildError(
            f"cannot compile here: {elsewhere}",
            hint=f"run `repro lock --variant {how.variant}` on linux x86_64 with Python {how.python} "
            "(the base image itself will do) and commit lockfiles/",
        )
    if how.index_url:
        reachable(how.index_url)  # seconds, where pip would retry for minutes
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        kept = _compile_in_temp(text, how, on_line, previous, upgrade)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _no_space() from e
        raise
    body = "\n".join(kept) + "\n"
    cuda_version(how.variant, pin_list(body))  # a CPU torch in a cuda lock is refused, and never cached
    _cpu_build(how, pin_list(body))  # … and a CUDA torch in a CPU image's lock
    try:
        atomic.write_bytes(dest, body.encode())
    except OSError as e:
        raise from_os_error(e, dest) from e


def _compile_in_temp(
    text: str, how: Resolution, on_line: OnLine | None, previous: str | None, upgrade: list[str] | None
) -> list[str]:
    """Run pip-compile in a temporary directory; the lock's lines.

    Raises:
        BuildError: pip-compile failed. OSFailure: the temporary directory is full.
        OSError: a file in it could not be written.
    """
    with tempfile.TemporaryDirectory(prefix="repro-lock-") as tmp:
        src = Path(tmp) / "requirements.in"
        out = Path(tmp) / "requirements.txt"
        body = text
        if how.constraints:
            (Path(tmp) / "held.txt").write_text("\n".join(how.constraints) + "\n")
            body += "\n-c held.txt\n"
        src.write_text(body)
        if previous is not None and upgrade != []:
            out.write_text(previous)  # pip-compile keeps the pins it finds there unless upgrading
        cmd = [
            sys.executable, "-m", "piptools", "compile", "--generate-hashes", "--allow-unsafe",
            "--strip-extras", "--no-emit-index-url", "--no-emit-find-links", "--verbose",
            "--output-file", out.name, src.name,
        ]  # fmt: skip  # relative to the directory it runs in: no temporary path reaches the lock
        if upgrade == []:
            cmd.append("--upgrade")
        for name in upgrade or []:
            cmd += ["--upgrade-package", name]
        if how.index_url:
            cmd += ["--extra-index-url", how.index_url]
        lines = _stream(cmd, tmp, on_line, env={**os.environ, "CUSTOM_COMPILE_COMMAND": remake_command(how)})
        if not out.is_file():
            raise BuildError("pip-compile failed: " + " | ".join(_errors(lines)), hint=COMPILE_HINT)
        return [ln for ln in out.read_text().splitlines() if not ln.startswith("#    pip-compile")]


def remake_command(how: Resolution) -> str:
    """The command a lockfile's header names as the one that remakes it (pip-compile's header would
    name its own temporary files)."""
    return "repro lock" if how.variant == "cpu" else f"repro lock --variant {how.variant}"


def _errors(lines: list[str]) -> list[str]:
    return [ln for ln in lines if ln.strip() and "is ignored" not in ln][-8:]


def _stream(cmd: list[str], cwd: str, on_line: OnLine | None, env: dict[str, str] | None = None) -> list[str]:
    """Run pip-compile, passing each line on as it comes; returns its lines.

    Raises:
        BuildError: pip-compile could not start, or failed.
    """
    try:
        proc = subprocess.Popen(
            cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env
        )
    except OSError as e:
        raise BuildError(f"pip-compile could not run: {e}", hint="pip install pip-tools") from e
    lines: list[str] = []
    crashed = False  # pip's own traceback follows: kept for the error, not shown line by line
    assert proc.stdout is not None
    try:
        with proc.stdout:
            for raw in proc.stdout:
                line = raw.rstrip()
                lines.append(line)
                crashed = crashed or line.startswith("Traceback (most recent call last)")
                if on_line and line and "is ignored" not in line and not crashed:
                    on_line(line)
        code = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if code != 0 and any(mark in line for line in lines for mark in _NO_SPACE):
        raise _no_space()
    if code != 0:
        raise BuildError("pip-compile failed: " + " | ".join(_errors(lines)), hint=COMPILE_HINT)
    return lines


_NO_SPACE = ("No space left on device", "[Errno 28]", "Disk quota exceeded", "[Errno 122]")


def _no_space() -> OSFailure:
    """A full disk while pip-compile ran: where (the temporary directory, or pip's cache when that is
    the fuller of the two: pip's message does not say), and what to point elsewhere."""
    temp = Path(tempfile.gettempdir())
    cache = Path(os.environ.get("PIP_CACHE_DIR") or Path.home() / ".cache" / "pip")
    if cache.is_dir() and _free(cache) < _free(temp):
        return OSFailure(
            f"No space left on device: {cache} (pip's cache, while pip-compile ran)",
            hint="free space there, or point PIP_CACHE_DIR at a disk with room",
        )
    return OSFailure(
        f"No space left on device: {temp} (the temporary directory pip-compile works in)",
        hint="free space there, or point TMPDIR at a disk with room: TMPDIR=/var/tmp repro lock",
    )


def _free(path: Path) -> int:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return 1 << 62
