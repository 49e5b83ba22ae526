"""A writable scratch copy of the project for a container, and bringing its changes back.

The container sees the project as a copy it may write anywhere in (a script saves
``model.pt`` into its working directory, checkpoints into ``out/``, TensorBoard events into
``runs/``), while the project itself stays untouched until the run ends. Then every file
new or changed in the copy is moved into the project, where the local backend would have
written it, and reported as written by the command. Files that are large are hard-linked,
not copied; the store, version control, virtual environments and the paths mounted
separately (data, outputs) are left out.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from repro import walk

Stat = tuple[int, int]

LINK_ABOVE = 16 * 1024 * 1024  # bytes: larger files are hard-linked into the copy
_SKIP_NAMES = frozenset({".repro", ".git", "__pycache__", ".mypy_cache", ".pytest_cache", ".tox"})


def _skipped(path: Path, rel: str, separate: set[str]) -> bool:
    return path.name in _SKIP_NAMES or rel in separate or (path / "pyvenv.cfg").is_file()


def make(root: Path, dest: Path, separate: list[str]) -> dict[str, Stat]:
    """Copy ``root`` into ``dest``, leaving out the ``separate`` paths; the copy's file stats."""
    separate_set = {s.strip("/") for s in separate}
    copied: dict[str, Stat] = {}
    dest.mkdir(parents=True, exist_ok=True)

    def keep_dir(path: Path, rel: str) -> bool:
        if _skipped(path, rel, separate_set) or path.is_symlink():
            return False
        (dest / rel).mkdir(parents=True, exist_ok=True)
        return True

    for rel, path in walk.files(root, keep_dir):
        if rel in separate_set or rel.endswith(".pyc"):
            continue
        _copy(path, dest / rel)
        st = (dest / rel).lstat()
        copied[rel] = (st.st_size, st.st_mtime_ns)
    return copied


def _copy(source: Path, target: Path) -> None:
    if source.is_symlink():
        target.symlink_to(os.readlink(source))
        return
    if source.stat().st_size > LINK_ABOVE:
        try:
            os.link(source, target)
            return
        except OSError:
            pass
    shutil.copy2(source, target)


def changed(dest: Path, copied: dict[str, Stat], separate: list[str]) -> list[str]:
    """Files new or changed in the copy since ``make`` (not inside the separately mounted paths)."""
    separate_set = {s.strip("/") for s in separate}
    found = []
    for rel, path in walk.files(dest, lambda _path, rel: rel not in separate_set):
        if rel in separate_set:
            continue
        try:
            st = path.lstat()
        except OSError:
            continue
        if copied.get(rel) != (st.st_size, st.st_mtime_ns):
            found.append(rel)
    return sorted(found)


def bring_back(dest: Path, root: Path, rels: list[str]) -> None:
    """Move the changed files from the copy into the project."""
    for rel in rels:
        source, target = dest / rel, root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(source, target)
        except OSError:
            shutil.copy2(source, target)
