"""A container ends with the repro process that started it, even when that process is killed."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys

import docker
import docker.errors
import requests.exceptions

from repro.backends.base import (
    runtime_source,
)
from repro.backends.docker.engine import SERVICE_ENV, engine, reaper_env
from repro.errors import ReproError

STOP_TIMEOUT_S = 10
# The reaper: a small process that outlives a killed repro and removes its container. It
# waits on a pipe; "done" means repro removed the container itself, end-of-file means
# repro died (SIGKILL included) and the container must go.
_REAPER = (
    "import sys\n"
    "if sys.stdin.readline().strip() != 'done':\n"
    "    from repro.backends.docker.reaper import reap\n"
    "    reap(sys.argv[1])\n"
)


def _pythonpath() -> str:
    """repro's own source first, then whatever this process was given (its dependencies, where an
    interpreter runs with another environment's site-packages)."""
    return os.pathsep.join(p for p in (str(runtime_source()[1]), os.environ.get("PYTHONPATH", "")) if p)


def start_reaper(cid: str) -> subprocess.Popen[bytes] | None:
    try:
        return subprocess.Popen(
            [sys.executable, "-c", _REAPER, cid],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C and a killed process group leave it running
            env={**os.environ, **reaper_env(), "PYTHONPATH": _pythonpath()},
        )
    except OSError:
        return None  # `repro gc` still finds the container by its labels


def stop_reaper(reaper: subprocess.Popen[bytes] | None) -> None:
    if reaper is None or reaper.stdin is None:
        return
    with contextlib.suppress(OSError):
        reaper.stdin.write(b"done\n")
        reaper.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        reaper.wait(timeout=10)


def reap(cid: str) -> None:
    """Remove a container whose repro process died (run by the reaper process)."""
    with contextlib.suppress(ReproError, docker.errors.DockerException, requests.exceptions.RequestException):
        with engine(timeout=30) as client:
            client.api.remove_container(cid, force=True, v=True)
    pid, _, directory = os.environ.get(SERVICE_ENV, "").partition(":")
    if pid.isdigit():  # the API service repro started for the run (Podman's): it goes too
        with contextlib.suppress(OSError):
            os.kill(int(pid), signal.SIGTERM)
        shutil.rmtree(directory, ignore_errors=True)


def stop_quietly(api: docker.APIClient, cid: str) -> None:
    """Pass Ctrl-C on as SIGINT (the script may save what it has), then kill after a grace period."""
    try:
        api.kill(cid, signal="SIGINT")
        api.wait(cid, timeout=STOP_TIMEOUT_S)
        return
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        pass
    try:
        api.kill(cid)
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        pass


def remove_quietly(api: docker.APIClient, cid: str) -> None:
    try:
        api.remove_container(cid, force=True, v=True)
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        pass
