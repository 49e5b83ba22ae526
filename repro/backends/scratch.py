"""A writable scratch copy of the project for a container, and bringing its changes back.

The container sees the project as a copy it may write anywhere in (a script saves
``model.pt`` into its working directory, checkpoints into ``out/``, TensorBoard events into
``runs/``), while the project itself stays untouched until the run ends. Then every file
new or changed in the copy is moved into the project, where the local backend would have
written it, and reported as written by the command. A link the command made is moved as a
link, and nothing is moved through a link (`repro.collect.produced`). Files that are large are hard-linked,
not copied; the store, version control, virtual environments and the paths mounted
separately (data, outputs) are left out.

The copy's file stats (and the separate paths) are written beside it (``tree.json``, atomically,
once the copy is complete), so a copy left over by a repro process killed with its run can still
be told apart from the project: `recover` brings its changes back later, from `repro resume` or
`repro gc`, exactly as the end of the run would have.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from repro.backends import owners
from repro.collect import produced
from repro.errors import CapsuleInvalid
from repro.facts import walk
from repro.store import atomic

Stat = tuple[int, int]

TREE = "tree"  # the copy, in the run's work directory
FORMAT = "repro.scratch/v1"

LINK_ABOVE = 16 * 1024 * 1024  # bytes: larger files are hard-linked into the copy
_SKIP_NAMES = frozenset({".repro", ".git", "__pycache__", ".mypy_cache", ".pytest_cache", ".tox"})


def _skipped(path: Path, rel: str, separate: set[str]) -> bool:
    return path.name in _SKIP_NAMES or rel in separate or (path / "pyvenv.cfg").is_file()


def state_path(dest: Path) -> Path:
    """Where the stats of the copy at ``dest`` are kept: beside it, ``<dest>.json``."""
    return dest.with_name(f"{dest.name}.json")


def make(root: Path, dest: Path, separate: list[str]) -> dict[str, Stat]:
    """Copy ``root`` into ``dest``, leaving out the ``separate`` paths; the copy's file stats,
    also written to `state_path` once the copy is complete.

    Raises:
        OSError: the copy or its state could not be written.
    """
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
    state = {"format": FORMAT, "root": str(root), "separate": sorted(separate_set), "copied": copied}
    atomic.write_bytes(state_path(dest), json.dumps(state).encode())
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
    """Files and links new or changed in the copy since ``make`` (not inside the separately mounted
    paths); a link the command made (to a directory too) is one entry, never entered."""
    separate_set = {s.strip("/") for s in separate}
    found = []
    for item in produced.walk(dest, keep_dir=lambda rel, _names: rel not in separate_set):
        if item.rel not in separate_set and copied.get(item.rel) != (item.size, item.mtime_ns):
            found.append(item.rel)
    return sorted(found)


def bring_back(dest: Path, root: Path, rels: list[str]) -> list[str]:
    """Move the changed files from the copy into the project, links as links, never through a link
    on either side; those moved (one behind a link in the project, or where a directory stands, stays)."""
    return [rel for rel in rels if produced.move(dest, root, rel)]


@dataclass
class LeftOver:
    """A copy left in a run's work directory: where it was copied from, and what changed in it."""

    root: Path
    changed: list[str]


def left_over(work_dir: Path) -> LeftOver | None:
    """The copy left in ``work_dir`` (``tree``), changing nothing. None when there is no copy, or
    a copy without its state (the copy was never finished, so no command ran in it).

    Raises:
        CapsuleInvalid: the copy's state is unreadable.
    """
    dest = work_dir / TREE
    if not dest.is_dir() or not state_path(dest).is_file():
        return None
    root, copied, separate = _read_state(state_path(dest))
    return LeftOver(root, changed(dest, copied, separate))


def recover(work_dir: Path, project_root: Path) -> list[str]:
    """Finish a run's copy in ``work_dir``: put owners and modes back (`owners.restore_from`),
    move the files the command changed back where the copy was made from (else into
    ``project_root``), remove the copy; those files.

    Safe to call again after a crash in the middle: what was moved is no longer in the copy.
    The caller makes sure nothing writes into the copy any more (no container of the run lives).

    Raises:
        CapsuleInvalid: the copy's state, or the owners kept for it, are unreadable (the copy
            is left as it is, for the files to be taken by hand).
    """
    dest = work_dir / TREE
    found = left_over(work_dir)  # reads the state first: an unreadable one changes nothing
    owners.restore_from(work_dir / owners.STATE)
    written = found.changed if found is not None else []
    # Back where it was copied from; ``project_root`` when that place is gone (a moved project).
    root = found.root if found is not None and found.root.is_dir() else project_root
    written = bring_back(dest, root, written)
    shutil.rmtree(dest, ignore_errors=True)
    state_path(dest).unlink(missing_ok=True)
    return written


def _read_state(path: Path) -> tuple[Path, dict[str, Stat], list[str]]:
    try:
        body = json.loads(path.read_bytes())
        if body.get("format") != FORMAT:
            raise ValueError(f"format {body.get('format')!r}")
        copied = {str(rel): (int(st[0]), int(st[1])) for rel, st in body["copied"].items()}
        return Path(body["root"]), copied, [str(s) for s in body["separate"]]
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
        raise CapsuleInvalid(
            f"the run's copy of the project cannot be matched to the project: {path} is unreadable ({e})",
            member=path.name,
            hint=f"copy the files you need from {path.with_suffix('')} into the project, delete it, "
            "then try again",
        ) from e
