"""`repro gc` on rootless Podman: containers of this store whose repro process is gone (a crash the
reaper did not outlive), removed by the docker backend's rule through a service started for it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from repro.backends.docker.engine import LABEL_STORE, served_at
from repro.backends.docker.gc import remove_stale_containers as remove_in_engine
from repro.backends.podman.service import PODMAN, Service, usable
from repro.errors import BackendUnavailable


def _any_of_store(store_dir: Path) -> bool:
    try:
        done = subprocess.run(
            [PODMAN, "ps", "-aq", "--filter", f"label={LABEL_STORE}={store_dir.resolve()}"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


def remove_stale_containers(store_dir: Path, dry_run: bool = False) -> list[str]:
    """Remove this user's Podman containers of this store whose repro process is gone; their names
    ([] where rootless Podman is not usable, or holds none of this store's)."""
    if not usable() or not _any_of_store(store_dir):
        return []
    service = Service()
    try:
        service.start()
        with served_at(service.url, service.owner()):
            return remove_in_engine(store_dir, dry_run=dry_run)
    except BackendUnavailable:
        return []
    finally:
        service.stop()
