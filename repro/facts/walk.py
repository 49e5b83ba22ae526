"""Walk a project tree: each file's relative POSIX path, below directories a rule keeps."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path


def files(root: Path, keep_dir: Callable[[Path, str], bool]) -> Iterator[tuple[str, Path]]:
    """``(rel, path)`` of every file under ``root``; directories sorted, a directory entered
    only when ``keep_dir(path, rel)`` is true. ``rel`` is relative to ``root``, with ``/``."""
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        rel_dir = here.relative_to(root).as_posix()
        dirnames[:] = [d for d in sorted(dirnames) if keep_dir(here / d, _join(rel_dir, d))]
        for name in filenames:
            yield _join(rel_dir, name), here / name


def _join(rel_dir: str, name: str) -> str:
    return name if rel_dir == "." else f"{rel_dir}/{name}"
