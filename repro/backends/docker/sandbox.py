"""Sandbox containers: building source-only packages into wheels, and unpickling untrusted files.

Each runs with no network, as the host user, removed when it ends or when repro dies.
"""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import docker
import docker.errors
import requests.exceptions

from repro import units
from repro.backends import images, sourcebuild
from repro.backends.base import (
    Event,
    OnEvent,
)
from repro.backends.docker.engine import LABEL_HOST, LABEL_PID, TAIL, engine
from repro.backends.docker.reaper import remove_quietly, start_reaper, stop_reaper
from repro.errors import BuildError
from repro.facts.lockfile import parse_lockfile

SANDBOX_LABEL = "org.repro.sandbox"
_POLL_S = 2


def build_wheels(
    client: docker.DockerClient,
    lockfile: Path | None,
    lock: bytes,
    base_id: str,
    python: str | None,
    on_event: OnEvent,
    extra_index: str | None = None,
) -> tuple[dict[str, images.Wheel], list[str]]:
    """The wheel of each locked package, and the names of those built from source in the sandbox.

    Raises:
        BuildError: a file cannot be fetched, or a source distribution does not build.
    """
    if lockfile is None or not lock.strip():
        return {}, []

    def say(line: str) -> None:
        on_event(Event("build", line))

    house = images.wheelhouse_dir()
    before = set(house.iterdir()) if house.is_dir() else set()
    on_event(Event("stage", "wheels: the lock's wheelhouse"))
    fetched = images.prepare_wheelhouse(lockfile, on_line=say, python_version=python, extra_index=extra_index)
    new = [f.path for f in fetched.values() if f.path not in before]
    total = units.human_bytes(sum(f.path.stat().st_size for f in fetched.values()))
    got = units.human_bytes(sum(path.stat().st_size for path in new))
    on_event(Event("stage-end", f"wheels: {len(fetched)} in the lock ({total}), {len(new)} fetched ({got})"))
    wheels = {key: images.Wheel(f.path) for key, f in fetched.items() if f.kind == "wheel"}
    pinned = {req.key: req for req in parse_lockfile(lock.decode())}
    sdists = [(pinned[key], f) for key, f in fetched.items() if f.kind == "sdist"]
    if not sdists:
        return wheels, []

    def run(inbox: Path, outbox: Path, timeout: int, on_line: Callable[[str], None]) -> int:
        return run_sandbox(client, base_id, inbox, outbox, timeout, on_line)

    on_event(Event("stage", f"source builds: {units.plural(len(sdists), 'package')} in the sandbox"))
    built = sourcebuild.build(sdists, base_id, python, run, say)
    on_event(Event("stage-end", f"source builds: {units.plural(len(built), 'wheel')} built in the sandbox"))
    wheels.update({key: images.Wheel(b.wheel, b.sha256) for key, b in built.items()})
    return wheels, sorted(built)


def _wait_streaming(api: docker.APIClient, cid: str, timeout: int, on_line: Callable[[str], None]) -> int:
    """Wait for a started container, passing its output on line by line (in this thread) and
    killing it after ``timeout`` seconds.

    Raises:
        BuildError: it ran past ``timeout``.
    """
    lines: queue.SimpleQueue[str] = queue.SimpleQueue()

    def pump() -> None:
        with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
            for raw in api.logs(cid, stream=True, follow=True):
                for line in raw.decode(errors="replace").splitlines():
                    lines.put(line.rstrip())

    reader = threading.Thread(target=pump, name="repro-sandbox-log", daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout

    def drain() -> None:
        while not lines.empty():
            on_line(lines.get())

    try:
        while True:
            drain()
            try:
                return int(api.wait(cid, timeout=_POLL_S).get("StatusCode", 1))
            except requests.exceptions.RequestException:
                api.inspect_container(cid)  # the engine is still there: it was the poll's timeout
            if time.monotonic() > deadline:
                with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
                    api.kill(cid)
                raise BuildError(
                    f"the source build ran past {timeout}s in the sandbox and was stopped",
                    hint="lock a release of the package that ships a wheel for the image's Python",
                )
    finally:
        reader.join(timeout=10)
        drain()


def run_sandbox(
    client: docker.DockerClient,
    image: str,
    inbox: Path,
    outbox: Path,
    timeout: int,
    on_line: Callable[[str], None],
) -> int:
    """Run ``/build/build.sh`` from the tar ``inbox`` in a throw-away container of ``image`` with no
    network, no mounts, no capabilities, as nobody; write its ``/build/out`` as the tar ``outbox``.
    Returns the script's exit status. The container is removed whatever happens.

    Raises:
        BuildError: the sandbox ran past ``timeout`` seconds, or could not be made.
    """
    api = client.api
    host_config = api.create_host_config(
        network_mode="none",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        pids_limit=4096,
        auto_remove=False,
    )
    labels = {SANDBOX_LABEL: "source-build", LABEL_PID: str(os.getpid()), LABEL_HOST: socket.gethostname()}
    try:
        cid = str(
            api.create_container(
                image, ["sh", "/build/build.sh"], user=sourcebuild.SANDBOX_USER, working_dir="/tmp",
                environment={"HOME": "/tmp"}, network_disabled=True, labels=labels, host_config=host_config,
            )["Id"]
        )  # fmt: skip
    except docker.errors.APIError as e:
        raise BuildError(f"the engine could not make the build sandbox: {e.explanation or e}") from e
    reaper = start_reaper(cid)
    try:
        with open(inbox, "rb") as f:
            api.put_archive(cid, "/", f)
        api.start(cid)
        status = _wait_streaming(api, cid, timeout, on_line)
        stream, _ = api.get_archive(cid, sourcebuild.OUT)
        size = 0
        with open(outbox, "wb") as out:
            for chunk in stream:
                size += len(chunk)
                if size > sourcebuild.MAX_OUT:
                    raise BuildError(
                        f"a source build left more than {sourcebuild.MAX_OUT >> 30} GiB in its output",
                        hint="lock a release of the package that ships a wheel for the image's Python",
                    )
                out.write(chunk)
        return status
    finally:
        remove_quietly(api, cid)
        stop_reaper(reaper)


def run_unpickler(image: str, inbox: Path, script: str, outbox: Path, timeout: int) -> tuple[int, list[str]]:
    """Run ``python -c script`` in a throw-away container of ``image``: no network, no capabilities,
    nobody as its user, ``inbox``'s files ``a`` and ``b`` alone mounted read-only at ``/in``; its
    ``/tmp/out`` is written as the tar ``outbox``. Returns the exit status and the last output lines.

    Raises:
        BuildError: it ran past ``timeout`` seconds. BackendUnavailable: no engine answers.
    """
    lines: list[str] = []
    with engine() as client:
        api = client.api
        binds = {str(inbox / n): {"bind": f"/in/{n}", "mode": "ro"} for n in ("a", "b")}
        host_config = api.create_host_config(
            binds=binds, network_mode="none", cap_drop=["ALL"], security_opt=["no-new-privileges"],
            pids_limit=256, mem_limit="8g", auto_remove=False,
        )  # fmt: skip
        labels = {SANDBOX_LABEL: "unpickle", LABEL_PID: str(os.getpid()), LABEL_HOST: socket.gethostname()}
        cid = str(
            api.create_container(
                image, ["python", "-c", script], user="65534:65534", working_dir="/tmp",
                environment={"HOME": "/tmp"}, network_disabled=True, labels=labels, host_config=host_config,
            )["Id"]
        )  # fmt: skip
        reaper = start_reaper(cid)
        try:
            api.start(cid)
            status = _wait_streaming(api, cid, timeout, lines.append)
            if status == 0:
                stream, _ = api.get_archive(cid, "/tmp/out")
                with open(outbox, "wb") as out:
                    for chunk in stream:
                        out.write(chunk)
            return status, lines[-TAIL:]
        finally:
            remove_quietly(api, cid)
            stop_reaper(reaper)
