"""The Docker engine: connect to it, translate its errors, ask it about images.

The docker SDK's errors and transport errors become repro errors here (no engine →
BackendUnavailable, exit 3), chained with ``from e``. The labels repro puts on its containers
are defined here, for the run, the sandbox and `repro gc` alike.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

import docker
import docker.errors
import requests.exceptions

from repro.errors import BackendUnavailable, ReproError

ENGINE_HINT = (
    "start the Docker engine (`sudo systemctl start docker`) or point DOCKER_HOST at one; "
    "`--backend local` runs without it"
)
BASE_HINT = (
    'make it with `sudo "$(command -v repro)" base-image` (Debian packages, no registry), '
    "or set image.base in repro.yaml (REPRO_BASE_IMAGE) to an image the engine has"
)
PODMAN_HINT = "see `podman info` (scripts/podman-up.sh sets Podman up, as root), or use `--backend docker`"
GPU_HINT = "install the NVIDIA Container Toolkit for this engine, or run without --gpus"
LABEL_RUN = "org.repro.run-id"
# Who owns a container: the store it records into, and the repro process (pid on host) that
# started it. `repro gc` removes only containers of its own store whose owner is gone.
LABEL_STORE = "org.repro.store"
LABEL_PID = "org.repro.pid"
LABEL_HOST = "org.repro.host"
TAIL = 20


def _named() -> tuple[str, str]:
    """What errors call the engine of this block (Podman's service inside `served_at`), and their hint."""
    if _SERVED.get():
        return "rootless Podman", PODMAN_HINT
    return "the Docker engine", ENGINE_HINT


@contextmanager
def _translated(action: str) -> Iterator[None]:
    """Turn docker SDK and transport errors raised inside the block into repro errors."""
    name, hint = _named()
    try:
        yield
    except ReproError:
        raise
    except (requests.exceptions.ConnectionError, ConnectionError) as e:
        raise BackendUnavailable(f"{name} stopped answering while {action}", hint=hint) from e
    except requests.exceptions.Timeout as e:
        raise BackendUnavailable(f"{name} timed out while {action}", hint=hint) from e
    except docker.errors.APIError as e:
        explanation = str(e.explanation or e)
        if "could not select device driver" in explanation or "nvidia" in explanation.lower():
            raise BackendUnavailable(f"{name} cannot give GPUs: {explanation}", hint=GPU_HINT) from e
        raise BackendUnavailable(f"{name} refused {action}: {explanation}", hint=hint) from e
    except docker.errors.DockerException as e:
        raise BackendUnavailable(f"{name} failed while {action}: {e}", hint=hint) from e


# An engine with the Docker API other than DOCKER_HOST's, for the calls inside `served_at`: Podman's
# service socket, which the podman backend starts for its run; with the service's pid and directory,
# which a reaper removes after the container when repro was killed.
_SERVED: ContextVar[str | None] = ContextVar("served", default=None)
_SERVICE: ContextVar[str | None] = ContextVar("service", default=None)
SERVICE_ENV = "REPRO_REAP_SERVICE"  # "<pid>:<directory>": what the reaper stops after the container


@contextmanager
def served_at(url: str, service: str | None = None) -> Iterator[None]:
    """Inside the block, `engine` and `engine_available` talk to the Docker API at ``url``;
    ``service`` ("<pid>:<directory>") is the process serving it, for the reaper to stop."""
    token, owned = _SERVED.set(url), _SERVICE.set(service)
    try:
        yield
    finally:
        _SERVED.reset(token)
        _SERVICE.reset(owned)


def reaper_env() -> dict[str, str]:
    """What a reaper process needs to reach the engine of this block, and the service to stop."""
    env = {"DOCKER_HOST": _endpoint()}
    if service := _SERVICE.get():
        env[SERVICE_ENV] = service
    return env


def _endpoint() -> str:
    return _SERVED.get() or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _reachable(url: str, timeout: float) -> bool:
    """Whether the engine's socket accepts a connection.

    Checked with a socket this module closes itself: the SDK leaks the socket of a
    failed connect, which surfaces as a ResourceWarning.
    """
    parsed = urlsplit(url)
    if parsed.scheme in ("unix", "http+unix"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        address: Any = parsed.path
    elif parsed.scheme in ("tcp", "http", "https") and parsed.hostname:
        family = socket.AF_INET6 if ":" in parsed.hostname else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        address = (parsed.hostname, parsed.port or (2376 if os.environ.get("DOCKER_TLS_VERIFY") else 2375))
    else:
        return True  # ssh:// and others: let the SDK try
    try:
        sock.settimeout(timeout)
        sock.connect(address)
        return True
    except OSError:
        return False
    finally:
        sock.close()


def _connect(timeout: float) -> docker.DockerClient:
    if not _reachable(_endpoint(), min(timeout, 5.0)):
        raise docker.errors.DockerException(f"nothing listens at {_endpoint()}")
    served = _SERVED.get()
    if served:
        return docker.DockerClient(base_url=served, timeout=timeout)
    return docker.from_env(timeout=timeout)


@contextmanager
def engine(timeout: float = 60) -> Iterator[docker.DockerClient]:
    """A connected Docker client, closed on exit; engine errors inside become repro errors.

    Raises:
        BackendUnavailable: no engine answers (DOCKER_HOST or the default socket).
    """
    try:
        client = _connect(timeout)
    except docker.errors.DockerException as e:
        raise BackendUnavailable(f"no Docker engine answers at {_endpoint()}", hint=ENGINE_HINT) from e
    try:
        with _translated("talking to it"):
            yield client
    finally:
        client.close()


def engine_available(timeout: float = 2.0) -> bool:
    """Whether a Docker engine answers a ping within ``timeout`` seconds (for ``--backend auto``)."""
    try:
        client = _connect(timeout)
    except docker.errors.DockerException:
        return False
    try:
        return bool(client.ping())
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
        return False
    finally:
        client.close()


def inspect_base(client: docker.DockerClient, ref: str) -> dict[str, Any]:
    try:
        return dict(client.api.inspect_image(ref))
    except docker.errors.ImageNotFound as e:
        raise BackendUnavailable(f"the Docker engine has no base image {ref}", hint=BASE_HINT) from e


def find_image(client: docker.DockerClient, ref: str) -> str | None:
    try:
        return str(client.api.inspect_image(ref)["Id"])
    except docker.errors.ImageNotFound:
        return None


def has_image(ref: str) -> bool:
    """Whether the engine holds image ``ref`` (a tag or an id); False when no engine answers."""
    try:
        with engine(timeout=10) as client:
            return find_image(client, ref) is not None
    except BackendUnavailable:
        return False
