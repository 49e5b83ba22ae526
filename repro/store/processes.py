"""Whether a process still lives (the one check behind stale runs, orphaned containers and killed
exports), and which files this process's own output goes to."""

from __future__ import annotations

import os
import stat


def pid_alive(pid: object) -> bool:
    """True when ``pid`` names a live process on this host (one we may not signal counts as alive)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def own_output_files() -> set[tuple[int, int]]:
    """(device, inode) of the regular files this process's stdout and stderr write to: a log the
    shell sent repro's output to (``repro run … > train.out 2>&1 &``), which is neither code nor a
    run's output."""
    found: set[tuple[int, int]] = set()
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.add((st.st_dev, st.st_ino))
    return found


def is_own_output(path: str | os.PathLike[str], own: set[tuple[int, int]]) -> bool:
    """Whether ``path`` is one of the files ``own`` (`own_output_files`) names."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) in own
