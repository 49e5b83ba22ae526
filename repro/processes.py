"""Whether a process still lives: the one check behind stale runs and orphaned containers."""

from __future__ import annotations

import os


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
