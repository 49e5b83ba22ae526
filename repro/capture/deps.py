"""Dependencies: a hash-pinned lockfile compiled with pip-tools, reused while its inputs hold.

The lock is compiled from (first found): `deps.requirements` in repro.yaml,
`requirements.in`, a `requirements.txt` that is not already hash-pinned, or the
`[project].dependencies` of pyproject.toml. A `requirements.txt` that already carries
`--hash=` lines is used as the lock as it is.

Compiling takes about a minute, so a lock is reused while the hash of its inputs
(the source text, the Python version and the platform) is unchanged: it lives in
`lockfiles/` in the project, and in a per-user cache shared between projects.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

from repro.errors import BuildError, NotFoundError
from repro.hashing import hash_bytes

LOCK_DIR = "lockfiles"
LOCK_NAME = "requirements.lock.txt"
HEADER = "# repro-lock-inputs: "
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


@dataclass
class Lock:
    path: Path | None  # None: nothing declared, nothing locked
    source: Path | None = None
    inputs_hash: str | None = None
    requirements: list[str] = field(default_factory=list)  # name==version, sorted
    compiled: bool = False  # compiled by this call (not reused)


def cache_dir() -> Path:
    """The per-user cache (locks, wheelhouse): $REPRO_CACHE_DIR or ~/.cache/repro."""
    env = os.environ.get("REPRO_CACHE_DIR")
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "repro"
    return base


def pinned(text: str) -> list[str]:
    """`name==version` of every pin in a requirements/lock text, names normalised, sorted."""
    pins = []
    for line in text.splitlines():
        m = _PIN.match(line.strip())
        if m:
            pins.append(f"{re.sub(r'[-_.]+', '-', m.group(1)).lower()}=={m.group(2)}")
    return sorted(pins)


def find_source(root: Path, configured: str | None) -> tuple[Path | None, str | None]:
    """(the file the lock comes from, its text); a pyproject's dependencies become a text.

    Raises:
        NotFoundError: a configured requirements file is missing.
    """
    if configured:
        path = root / configured
        if not path.is_file():
            raise NotFoundError(f"deps.requirements names {configured!r}, which does not exist")
        return path, path.read_text()
    for name in ("requirements.in", "requirements.txt"):
        path = root / name
        if path.is_file():
            return path, path.read_text()
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            deps = tomllib.loads(pyproject.read_text()).get("project", {}).get("dependencies")
        except tomllib.TOMLDecodeError:
            deps = None
        if deps:
            return pyproject, "\n".join(deps) + "\n"
    return None, None


def inputs_hash(text: str) -> str:
    """What a lock depends on: the source text, the Python version and the platform."""
    key = (
        f"{text}\n--\n{sys.version_info.major}.{sys.version_info.minor}\n{sys.platform}\n{platform.machine()}"
    )
    return hash_bytes(key.encode())


def ensure_lock(root: Path, configured: str | None, on_line: Callable[[str], None] | None = None) -> Lock:
    """The project's lock: reused when its inputs are unchanged, else compiled (about a minute).

    Raises:
        BuildError: pip-compile failed (its last lines are in the message).
    """
    source, text = find_source(root, configured)
    if source is None or text is None:
        return Lock(path=None)
    if "--hash=" in text:
        return Lock(
            path=source, source=source, inputs_hash=hash_bytes(text.encode()), requirements=pinned(text)
        )
    digest = inputs_hash(text)
    lock_path = root / LOCK_DIR / LOCK_NAME
    if lock_path.is_file() and lock_path.read_text().startswith(HEADER + digest):
        return Lock(lock_path, source, digest, pinned(lock_path.read_text()))
    cached = cache_dir() / "locks" / f"{digest}.txt"
    compiled = False
    if not cached.is_file():
        if on_line:
            on_line(f"compiling a hash-pinned lockfile from {source.name} (pip-compile --generate-hashes)")
        _compile(text, cached)
        compiled = True
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = lock_path.with_name(f".{lock_path.name}.tmp")
    tmp.write_text(
        f"{HEADER}{digest}\n# source: {source.relative_to(root).as_posix()}\n" + cached.read_text()
    )
    os.replace(tmp, lock_path)
    return Lock(lock_path, source, digest, pinned(lock_path.read_text()), compiled)


def _compile(text: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="repro-lock-") as tmp:
        src = Path(tmp) / "requirements.in"
        out = Path(tmp) / "requirements.txt"
        src.write_text(text)
        cmd = [
            sys.executable, "-m", "piptools", "compile", "--generate-hashes", "--allow-unsafe",
            "--strip-extras", "--no-emit-index-url", "--no-emit-find-links", "--quiet",
            "--output-file", str(out), str(src),
        ]  # fmt: skip
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, timeout=1800)
        except (OSError, subprocess.SubprocessError) as e:
            raise BuildError(f"pip-compile could not run: {e}", hint="pip install pip-tools") from e
        if proc.returncode != 0 or not out.is_file():
            lines = [ln for ln in proc.stderr.splitlines() if "is ignored" not in ln][-8:]
            raise BuildError(
                "pip-compile failed: " + " | ".join(lines),
                hint="check the requirements; the packages must be installable for this Python",
            )
        body = "\n".join(ln for ln in out.read_text().splitlines() if not ln.startswith("#    pip-compile"))
        tmp_dest = dest.with_name(f".{dest.name}.tmp")
        tmp_dest.write_text(body + "\n")
        os.replace(tmp_dest, dest)


def freeze_diff(recorded: list[str], current: list[str]) -> list[str]:
    """Packages whose presence or version differs: `name: recorded → current`."""

    def split(items: list[str]) -> dict[str, str]:
        return dict(i.split("==", 1) for i in items if "==" in i)

    a, b = split(recorded), split(current)
    out = []
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            out.append(f"{name}: {a.get(name, 'absent')} → {b.get(name, 'absent')}")
    return out
