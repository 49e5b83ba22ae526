"""Handing host paths to the container user for a run, and putting owners and modes back.

Only when repro runs as root (the container never does): the writable mounts are handed to
the container user and the read-only tops made enterable. What was there before is written
to a state file in the run's work directory *before* anything changes, so a repro process
killed with its run (SIGKILL, a preempted node) leaves what is needed to put every owner and
mode back later (`restore_from`, called when a left-over copy is recovered).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from repro.errors import CapsuleInvalid
from repro.store import atomic

STATE = "owners.json"  # in the run's work directory
FORMAT = "repro.owners/v1"


@dataclass
class Saved:
    """Owners and modes of host paths as they were before the container ran, and the roots re-owned."""

    owners: dict[str, tuple[int, int]] = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)
    roots: list[str] = field(default_factory=list)


def entries(root: Path) -> Iterator[str]:
    """Every entry under ``root`` (itself included) that is ours to re-own: symbolic links
    are not followed (a link is re-owned itself), and hard-linked files (the scratch copy links
    large project files) are left alone, since changing one changes the project's file too."""
    for dirpath, dirnames, filenames in os.walk(root):
        yield dirpath
        for name in filenames + dirnames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue  # gone since it was listed
            if stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode) or st.st_nlink == 1:
                yield path


def open_for(uid: int, gid: int, writable: list[Path], tops: list[Path], state: Path) -> Saved:
    """Let the container user (``uid``:``gid``) write ``writable`` and enter ``tops``.

    A no-op unless the host user is root. Every owner and mode about to change is written
    to ``state`` first, then changed.

    Raises:
        OSError: the state file could not be written (nothing was changed then).
    """
    saved = Saved()
    if os.getuid() != 0:
        return saved
    saved.roots = [str(root) for root in writable]
    for root in writable:
        for entry in entries(root):
            st = os.lstat(entry)
            saved.owners[entry] = (st.st_uid, st.st_gid)
    for top in dict.fromkeys(tops):
        mode = top.stat().st_mode
        if mode & 0o005 != 0o005:
            saved.modes[str(top)] = mode & 0o7777
    _write(saved, state)
    for entry in saved.owners:
        os.chown(entry, uid, gid, follow_symlinks=False)
    for path, mode in saved.modes.items():
        os.chmod(path, mode | 0o005)
    return saved


def restore(saved: Saved) -> None:
    """Put back owners and modes; files the container created go to the host user."""
    for path, mode in saved.modes.items():
        with contextlib.suppress(OSError):
            os.chmod(path, mode)
    if os.getuid() != 0:
        return
    for root in map(Path, saved.roots):
        if not root.exists():
            continue
        for path in entries(root):
            uid, gid = saved.owners.get(path, (os.getuid(), os.getgid()))
            with contextlib.suppress(OSError):
                os.chown(path, uid, gid, follow_symlinks=False)


def restore_from(state: Path) -> None:
    """`restore` what ``state`` kept, then delete it; nothing to do when there is no state file.

    Raises:
        CapsuleInvalid: the state file is unreadable (owners are left as they are).
    """
    if not state.is_file():
        return
    restore(_read(state))
    state.unlink(missing_ok=True)


def _write(saved: Saved, state: Path) -> None:
    body = {"format": FORMAT, "owners": saved.owners, "modes": saved.modes, "roots": saved.roots}
    atomic.write_bytes(state, json.dumps(body).encode())


def _read(state: Path) -> Saved:
    try:
        body = json.loads(state.read_bytes())
        if body.get("format") != FORMAT:
            raise ValueError(f"format {body.get('format')!r}")
        return Saved(
            owners={str(p): (int(o[0]), int(o[1])) for p, o in body["owners"].items()},
            modes={str(p): int(m) for p, m in body["modes"].items()},
            roots=[str(r) for r in body["roots"]],
        )
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
        raise CapsuleInvalid(
            f"the owners and modes kept before the container ran are unreadable ({state}: {e})",
            member=STATE,
            hint=f"put owners back by hand (chown -R) where needed, delete {state}, then try again",
        ) from e
