"""Which file a project's lock is compiled from: `deps.requirements` in repro.yaml, `requirements.in`,
`requirements.txt` or the `[project].dependencies` of pyproject.toml, and the one nearest a command's folder.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from repro.errors import NotFoundError
from repro.facts import projectlock


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


def nearest_source(root: Path, cwd: Path) -> str | None:
    """The requirements file of the folder a command runs from, when that folder is below the project
    root: the first ``requirements.in``/``requirements.txt`` in it or a folder above it (the root's
    own excluded: `find_source` reads those), relative to ``root``; None when there is none, or when
    the project keeps its own lockfile (uv.lock, poetry.lock, pylock.toml): that is the lock."""
    if projectlock.find(root, None) is not None:
        return None
    try:
        rel = cwd.resolve().relative_to(root.resolve())
    except ValueError:
        return None
    folder = rel
    while folder.parts:
        for name in ("requirements.in", "requirements.txt"):
            if (root / folder / name).is_file():
                return (folder / name).as_posix()
        folder = folder.parent
    return None
