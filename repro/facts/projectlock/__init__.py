"""A project's own lockfile (uv.lock, poetry.lock, pylock.toml) read as repro's lock, never re-resolved.

Each format has its module (``uvlock``, ``poetrylock``, ``pylock``): it reads the file as
data (no tool runs), checks it against the project's ``pyproject.toml`` (a stale lock is an
error naming the command that refreshes it), picks the packages of the chosen dependency
groups and extras, and returns them as :class:`Entry` rows. Here they become the
hash-pinned requirements text every other lock is (``name==version ; marker --hash=…``),
so the image build, the wheelhouse and the hash checks see one kind of lock.

Which groups: the tool's default install set (uv: the ``dev`` group, or
``tool.uv.default-groups``; Poetry: every group not marked optional; pylock.toml: its
``default-groups``), or ``deps.groups`` in repro.yaml. Packages from a git URL, a local path
or a direct URL are refused: the image installs only hash-pinned releases from the host's
package sources (an index, find-links), and builds their sdists in the sandbox.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from repro.errors import NotFoundError, UsageError
from repro.facts.projectlock.common import (
    FILES,
    Entry,
    ProjectLock,
    Stale,
    environment,
    file_sha256,
    holds,
    kind_of,
    refresh,
    upgrade,
)

__all__ = ["FILES", "Entry", "ProjectLock", "Stale", "environment", "file_sha256", "find", "holds",
           "kind_of", "read", "refresh", "upgrade"]  # fmt: skip


def find(root: Path, configured: str | None) -> Path | None:
    """The project lockfile repro uses: ``deps.requirements`` when it names one, else the first of
    :data:`FILES` in the project root (None when ``deps.requirements`` names another file)."""
    if configured:
        path = root / configured
        return path if kind_of(path) else None
    return next((root / name for name in FILES if (root / name).is_file()), None)


def read(root: Path, path: Path, groups: Sequence[str] | None) -> ProjectLock:
    """The lockfile at ``path`` for ``groups`` (None: the tool's default set).

    Raises:
        NotFoundError: the file is missing. UsageError: unreadable, stale against
        pyproject.toml, an unknown group, or a package from a git URL or a local path.
    """
    # The format readers (and packaging's marker and specifier parsers): only with such a lockfile.
    from repro.facts.projectlock import poetrylock, pylock, uvlock

    kind = kind_of(path)
    data = load_toml(path)
    pyproject = load_pyproject(root)
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    if kind == "uv.lock":
        return uvlock.read(rel, data, pyproject, groups)
    if kind == "poetry.lock":
        return poetrylock.read(rel, data, pyproject, groups, path.read_text(errors="replace"))
    return pylock.read(rel, data, pyproject, groups, root)


def load_toml(path: Path) -> dict[str, Any]:
    """A TOML file as data.

    Raises:
        NotFoundError: missing. UsageError: not valid TOML.
    """
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError as e:
        raise NotFoundError(f"{path.name} does not exist ({path})") from e
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as e:
        raise UsageError(
            f"{path.name} cannot be read: {e}", hint=f"regenerate it with {refresh(path.name)}"
        ) from e


def load_pyproject(root: Path) -> dict[str, Any]:
    """The project's pyproject.toml as data ({} when it has none)."""
    path = root / "pyproject.toml"
    return load_toml(path) if path.is_file() else {}
