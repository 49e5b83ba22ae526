"""The Docker backend: build or reuse the run's image offline, then run the command in it.

The only module that imports the ``docker`` SDK. Engine and transport errors become
repro errors here (no engine → BackendUnavailable, exit 3; a failed build → BuildError),
chained with ``from e``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import posixpath
import queue
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import docker
import docker.errors
import requests.exceptions
from docker.types import DeviceRequest

from repro import units
from repro.backends import imagearchive, imagecheck, images, owners, scratch, sourcebuild
from repro.backends.base import (
    PROJECT_ENV,
    RANK_LOGS,
    RUNTIME_ENV_DIR,
    BuiltImage,
    Event,
    OnEvent,
    OpenImage,
    RunResult,
    RunSpec,
    Terminal,
    launch_argv,
    merge_pythonpath,
    runtime_source,
)
from repro.backends.baseimage import DEFAULT_BASE_IMAGE, PYTHON_LABEL
from repro.backends.output import CommandOutput
from repro.errors import BackendUnavailable, BuildError, CapsuleInvalid, NotFoundError, ReproError, UsageError
from repro.facts.lockfile import parse_lockfile
from repro.runtime import contract, terminal
from repro.runtime.terminal import STREAMS
from repro.store.processes import pid_alive

ENGINE_HINT = (
    "start the Docker engine (`sudo systemctl start docker`) or point DOCKER_HOST at one; "
    "`--backend local` runs without it"
)
BASE_HINT = (
    'make it with `sudo "$(command -v repro)" base-image` (Debian packages, no registry), '
    "or set image.base in repro.yaml (REPRO_BASE_IMAGE) to an image the engine has"
)
GPU_HINT = "install the NVIDIA Container Toolkit for this engine, or run without --gpus"

# Where things appear inside the container.
WORK = "/work"
INJECT = "/opt/repro/inject"
LIB = "/opt/repro/lib"
RUNTIME = "/opt/repro/run"
FALLBACK_UID = 1000  # the container user when the host user is root
STOP_TIMEOUT_S = 10
LABEL_RUN = "org.repro.run-id"
# Who owns a container: the store it records into, and the repro process (pid on host) that
# started it. `repro gc` removes only containers of its own store whose owner is gone.
LABEL_STORE = "org.repro.store"
LABEL_PID = "org.repro.pid"
LABEL_HOST = "org.repro.host"
_TAIL = 20
_GPU_TOOLS = ("nvidia-container-runtime-hook", "nvidia-container-runtime", "nvidia-ctk")


# --------------------------------------------------------------------------- engine access


@contextmanager
def _translated(action: str) -> Iterator[None]:
    """Turn docker SDK and transport errors raised inside the block into repro errors."""
    try:
        yield
    except ReproError:
        raise
    except (requests.exceptions.ConnectionError, ConnectionError) as e:
        raise BackendUnavailable(
            f"the Docker engine stopped answering while {action}", hint=ENGINE_HINT
        ) from e
    except requests.exceptions.Timeout as e:
        raise BackendUnavailable(f"the Docker engine timed out while {action}", hint=ENGINE_HINT) from e
    except docker.errors.APIError as e:
        explanation = str(e.explanation or e)
        if "could not select device driver" in explanation or "nvidia" in explanation.lower():
            raise BackendUnavailable(
                f"the Docker engine cannot give GPUs: {explanation}", hint=GPU_HINT
            ) from e
        raise BackendUnavailable(
            f"the Docker engine refused {action}: {explanation}", hint=ENGINE_HINT
        ) from e
    except docker.errors.DockerException as e:
        raise BackendUnavailable(f"Docker failed while {action}: {e}", hint=ENGINE_HINT) from e


def _endpoint() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


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


def _inspect_base(client: docker.DockerClient, ref: str) -> dict[str, Any]:
    try:
        return dict(client.api.inspect_image(ref))
    except docker.errors.ImageNotFound as e:
        raise BackendUnavailable(f"the Docker engine has no base image {ref}", hint=BASE_HINT) from e


def _image_id(client: docker.DockerClient, ref: str) -> str | None:
    try:
        return str(client.api.inspect_image(ref)["Id"])
    except docker.errors.ImageNotFound:
        return None


def has_image(ref: str) -> bool:
    """Whether the engine holds image ``ref`` (a tag or an id); False when no engine answers."""
    try:
        with engine(timeout=10) as client:
            return _image_id(client, ref) is not None
    except BackendUnavailable:
        return False


def import_rootfs(archive: Path, tag: str, changes: list[str]) -> str:
    """Import a root filesystem tar as image ``tag`` (``docker import``); returns the image id.

    Raises:
        BackendUnavailable: no engine answers.
        BuildError: the engine rejected the archive.
    """
    repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
    with engine(timeout=600) as client:
        try:
            client.api.import_image_from_file(
                str(archive), repository=repository, tag=version, changes=changes
            )
        except docker.errors.APIError as e:
            raise BuildError(f"the engine could not import {archive.name}: {e.explanation or e}") from e
        image_id = _image_id(client, tag)
    if image_id is None:
        raise BuildError(f"the import finished but no image {tag} exists")
    return image_id


# --------------------------------------------------------------------------- images


def ensure_image(
    client: docker.DockerClient,
    lockfile: Path | None,
    base: str,
    template: str,
    on_event: OnEvent,
    cuda_index: str | None = None,
) -> BuiltImage:
    """Reuse the image whose tag is the hash of its inputs, or build it offline. A CUDA image's
    wheels are fetched from ``cuda_index`` (the cuda.index setting) too, and its tag and labels
    name the CUDA version of its torch.

    Raises:
        BackendUnavailable: no base image ``base``.
        BuildError: the lockfile cannot be satisfied, a CUDA image's torch is a CPU build, or the
            build failed.
    """
    inspected = _inspect_base(client, base)  # a recorded id must exist in this engine too
    base_id = str(inspected["Id"])
    python = ((inspected.get("Config") or {}).get("Labels") or {}).get(PYTHON_LABEL)
    lock = lockfile.read_bytes() if lockfile is not None else b""
    dockerfile = images.render_dockerfile(template, base_id, lock.decode())
    cuda = images.cuda_of(lock.decode()) if template == "cuda" else None
    tag = images.image_tag(dockerfile, lock, base_id, cuda)
    existing = _image_id(client, tag)
    if existing is not None:
        on_event(Event("info", f"reusing image {tag}"))
        labels = dict((client.api.inspect_image(existing).get("Config") or {}).get("Labels") or {})
        kinds = images.installed_from(lock.decode(), labels)
        return BuiltImage(existing, tag, base, base_id, template, dockerfile, True, 0.0, installed_from=kinds)
    start = time.monotonic()
    index = cuda_index if template == "cuda" else None
    wheels, built = _wheels(client, lockfile, lock, base_id, python, on_event, index)
    paths = {key: wheel.path for key, wheel in wheels.items()}
    size = units.human_bytes(sum(p.stat().st_size for p in paths.values()))
    shown = f"{units.plural(len(wheels), 'wheel')}, {size}"
    on_event(Event("info", f"building image {tag} from {base} ({shown})"))
    labels = images.image_labels(lock, base_id, template, built, cuda)
    with tempfile.TemporaryFile(prefix="repro-context-") as context:
        images.write_context(context, dockerfile, lock, wheels)
        context.seek(0)
        _build(client, context, tag, labels, _BuildStages(lock, paths, on_event))
    image_id = _image_id(client, tag)
    if image_id is None:
        raise BuildError(f"the build finished but no image {tag} exists")
    check_installed(client, image_id, tag, lock.decode(), on_event)
    kinds = images.installed_from(lock.decode(), labels)
    return BuiltImage(
        image_id,
        tag,
        base,
        base_id,
        template,
        dockerfile,
        False,
        time.monotonic() - start,
        installed_from=kinds,
    )


VENV_PYTHON = "/opt/venv/bin/python"  # the templates' venv


def check_installed(
    client: docker.DockerClient, image_id: str, tag: str, lock: str, on_event: OnEvent
) -> None:
    """Read the new image's installed distributions (every dist-info, duplicates included) in a
    container without network, and fail the build where they are not exactly the lock; a failed
    image is removed, so that no later run reuses it.

    Raises:
        BuildError: the image does not hold exactly its lock, or cannot be asked.
    """
    try:
        out = client.containers.run(
            image_id, [VENV_PYTHON, "-I", "-c", imagecheck.PROBE], entrypoint=[], network_disabled=True,
            remove=True, stdout=True, stderr=True, user="0:0", working_dir="/",
        )  # fmt: skip
        found, env = imagecheck.parse_probe(out.decode(errors="replace"))
    except (docker.errors.APIError, docker.errors.ContainerError, ValueError, KeyError, IndexError) as e:
        _remove_image_quietly(client, image_id)
        raise BuildError(f"the image {tag} could not be checked against its lock: {str(e)[:300]}") from e
    wrong = imagecheck.differences(lock, found, env)
    if wrong:
        _remove_image_quietly(client, image_id)
        raise BuildError(
            imagecheck.message(tag, wrong), hint="the lock or the Dockerfile template is at fault"
        )
    on_event(Event("info", f"image {tag}: {units.plural(len(found), 'distribution')}, exactly the lock"))


def _remove_image_quietly(client: docker.DockerClient, image_id: str) -> None:
    with contextlib.suppress(docker.errors.APIError):
        client.api.remove_image(image_id, force=True)


def _wheels(
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


SANDBOX_LABEL = "org.repro.sandbox"
_POLL_S = 2


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
    reaper = _start_reaper(cid)
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
        _remove_quietly(api, cid)
        _stop_reaper(reaper)


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
        reaper = _start_reaper(cid)
        try:
            api.start(cid)
            status = _wait_streaming(api, cid, timeout, lines.append)
            if status == 0:
                stream, _ = api.get_archive(cid, "/tmp/out")
                with open(outbox, "wb") as out:
                    for chunk in stream:
                        out.write(chunk)
            return status, lines[-_TAIL:]
        finally:
            _remove_quietly(api, cid)
            _stop_reaper(reaper)


def repro_images() -> list[str]:
    """The images repro built for runs (labelled with their template), newest first; [] without an engine."""
    try:
        with engine(timeout=5) as client:
            found = client.api.images(filters={"label": images.LABEL_TEMPLATE})
    except ReproError:
        return []
    return [str(i["Id"]) for i in sorted(found, key=lambda i: i.get("Created", 0), reverse=True)]


def _carried_image(
    client: docker.DockerClient, recorded: BuiltImage, archive: OpenImage, on_event: OnEvent
) -> BuiltImage:
    """The recorded image, checked against the capsule's archive: the engine's copy when it has that
    id, else loaded from the archive with every name in it ignored; tagged ``repro-env:sha256-…``
    only, so no tag the capsule names is created or moved: the engine gets the archive repro rebuilt
    (`imagearchive.rebuilt`), never the capsule's.

    Raises:
        CapsuleInvalid: the archive does not hold the recorded image, or loads another one
            (what it loaded is removed again).
        BuildError: the engine rejected the archive.
    """
    image_id = recorded.id
    with archive() as stream:
        held = imagearchive.read_index(stream).images
    if image_id not in held:
        shown = ", ".join(i[:19] for i in held) or "no image"
        raise CapsuleInvalid(
            f"the capsule's image archive holds {shown}, not the recorded image {image_id[:19]}",
            hint="the image archive was replaced or the record edited; do not replay this capsule",
        )
    loaded = _image_id(client, image_id) is None
    if loaded:
        shown = image_id[:19]
        on_event(Event("info", f"loading image {shown} from the capsule (no build; names in it are ignored)"))
        _load_untagged(client, archive, held[image_id], image_id, on_event)
    else:
        on_event(Event("info", f"reusing image {image_id[:19]} (the one the capsule carries)"))
    tag = images.carried_tag(image_id)
    repository, _, version = tag.partition(":")
    client.api.tag(image_id, repository, version)
    return dataclasses.replace(recorded, tag=tag, reused=not loaded, build_seconds=0.0, loaded=loaded)


def _load_untagged(
    client: docker.DockerClient,
    archive: OpenImage,
    image: imagearchive.Image,
    image_id: str,
    on_event: OnEvent,
) -> None:
    """Load ``image`` of ``archive``, rebuilt nameless (`imagearchive.rebuilt`), and make sure the
    engine named it ``image_id``; whatever else it loaded, or all of it on failure, is removed.

    Raises:
        CapsuleInvalid: the engine loaded an image of another id.
        BuildError: the engine rejected the archive.
    """
    before = {str(item["Id"]) for item in client.api.images(all=True)}
    reported: list[str] = []
    try:
        with archive() as stream:
            load_image(client, imagearchive.rebuilt(stream, image), on_event, reported)
        if _image_id(client, image_id) is None or any(i != image_id for i in reported):
            shown = ", ".join(i[:19] for i in reported) or "no image"
            raise CapsuleInvalid(
                f"the capsule's image archive loaded {shown}, not the recorded image {image_id[:19]}; "
                "it was removed again",
                hint="the image archive was replaced or the record edited; do not replay this capsule",
            )
    except BaseException:
        for doomed in {*reported, image_id} - before:
            with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
                client.api.remove_image(doomed)
        raise


def save_image(image_id: str, tag: str | None, dest: Path) -> int:
    """Write ``docker save`` of one image (every layer once, with its tag) to ``dest``; its size.

    Raises:
        BackendUnavailable: no engine answers.
        NotFoundError: the engine has no such image.
    """
    with engine(timeout=600) as client:
        if _image_id(client, image_id) is None:
            raise NotFoundError(
                f"the Docker engine has no image {image_id[:19]} to export",
                hint="replay the run once on this engine (it rebuilds the image), then export again",
            )
        ref = tag if tag and _image_id(client, tag) == image_id else image_id
        tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
        try:
            with open(tmp, "wb") as f:
                for chunk in client.api.get_image(ref, chunk_size=1 << 20):
                    f.write(chunk)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
    return dest.stat().st_size


_LOADED = re.compile(r"Loaded image ID: (sha256:[0-9a-f]{64})")


def load_image(
    client: docker.DockerClient, archive: Iterable[bytes], on_event: OnEvent, loaded: list[str] | None = None
) -> list[str]:
    """``docker load`` an image archive streamed in chunks; the ids the engine says it loaded (also
    appended to ``loaded`` as they come, so a caller knows them when the load fails half-way).

    Raises:
        BuildError: the engine rejected the archive.
    """
    loaded = [] if loaded is None else loaded
    try:
        for chunk in client.api.load_image(archive):
            if isinstance(chunk, dict) and chunk.get("error"):
                raise BuildError(f"the engine could not load the capsule's image: {chunk['error']}")
            text = str(chunk.get("stream", "")).strip() if isinstance(chunk, dict) else ""
            if text:
                loaded += _LOADED.findall(text)
                on_event(Event("build", text))
    except docker.errors.APIError as e:
        raise BuildError(f"the engine could not load the capsule's image: {e.explanation or e}") from e
    return loaded


_STEP = re.compile(r"^Step (\d+)/(\d+) : (\S+)(.*)$")
_LAYER = re.compile(r"\blayers/(\d+)-([\w.-]+)/")


class _BuildStages:
    """Turns the builder's output into stages: the base setup, then one stage per layer group
    (its COPY and pip install steps), each with its wheel count and size. Every line also goes
    on as a "build" event, for the full log."""

    def __init__(self, lock: bytes, wheels: dict[str, Path], on_event: OnEvent) -> None:
        groups = images.layer_groups(parse_lockfile(lock.decode())) if lock.strip() else []
        self.groups = [
            (name, len(reqs), sum(wheels[r.key].stat().st_size for r in reqs if r.key in wheels))
            for name, reqs in groups
        ]
        self.on_event = on_event
        self.label: str | None = None
        self.steps = self.cached = 0

    def line(self, text: str) -> None:
        step = _STEP.match(text)
        if step is not None:
            layer = _LAYER.search(step.group(4)) if step.group(3) == "COPY" else None
            if layer is not None and int(layer.group(1)) < len(self.groups):
                index = int(layer.group(1))
                name, count, size = self.groups[index]
                shown = f"{units.plural(count, 'wheel')}, {units.human_bytes(size)}"
                self._begin(f"layer {index + 1}/{len(self.groups)} {name}: {shown}")
            elif step.group(3) == "FROM" and self.label is not None:  # the image's own stage
                self._begin(f"image: {units.plural(len(self.groups), 'installed layer')}, no wheel files")
            elif self.label is None:
                self._begin("image setup: base, venv")
            self.steps += step.group(3) != "FROM"  # a FROM step is never "cached": it names the base
        elif text.strip() == "---> Using cache":
            self.cached += 1
        self.on_event(Event("build", text))

    def _begin(self, label: str) -> None:
        self.end()
        self.label, self.steps, self.cached = label, 0, 0
        self.on_event(Event("stage", label))

    def end(self) -> None:
        if self.label is not None:
            cached = " (cached)" if self.steps and self.cached >= self.steps else ""
            self.on_event(Event("stage-end", self.label + cached))
        self.label = None


def _build(
    client: docker.DockerClient, context: Any, tag: str, labels: dict[str, str], stages: _BuildStages
) -> None:
    tail: list[str] = []
    try:
        stream = client.api.build(
            fileobj=context,
            custom_context=True,
            tag=tag,
            labels=labels,
            rm=True,
            forcerm=True,
            pull=False,
            network_mode="none",  # nothing inside the build reaches the network
            decode=True,
            timeout=None,
        )
        for chunk in stream:
            if "error" in chunk or "errorDetail" in chunk:
                message = chunk.get("error") or chunk.get("errorDetail", {}).get("message", "")
                raise BuildError(
                    f"the image build failed: {message}\n" + "\n".join(tail[-_TAIL:]),
                    hint="the lockfile must pin wheels for the image's Python (cp311 on bookworm)",
                )
            for line in str(chunk.get("stream", "")).splitlines():
                if line.strip():
                    tail = (tail + [line])[-_TAIL:]
                    stages.line(line)
    except docker.errors.APIError as e:
        raise BuildError(f"the engine refused to build {tag}: {e.explanation or e}") from e
    stages.end()


# --------------------------------------------------------------------------- the backend


class DockerBackend:
    """Runs each command in a container built from the run's pinned inputs."""

    name = "docker"

    def __init__(self, base_image: str = DEFAULT_BASE_IMAGE) -> None:
        self.base_image = base_image
        self._built: dict[tuple[Any, ...], BuiltImage] = {}

    def _key(self, spec: RunSpec) -> tuple[Any, ...]:
        return (spec.lockfile, spec.base_image or self.base_image, images.template_for(spec.gpus))

    def prepare(self, spec: RunSpec, on_event: OnEvent) -> BuiltImage:
        """Build or reuse the run's image.

        A capsule that carries its image (``spec.image_archive``) is replayed in exactly that
        image: reused when the engine has it, else loaded from the archive; never rebuilt.

        Raises:
            BackendUnavailable: no engine, no base image, or GPUs asked for and absent.
            BuildError: the wheelhouse or the image build failed, or a carried image does not load.
        """
        with engine(timeout=600) as client:
            if spec.gpus:
                _check_gpus(client)
            if spec.image_archive is not None and spec.recorded_image:
                built = _carried_image(client, spec.recorded_image, spec.image_archive, on_event)
                self._built[self._key(spec)] = built
                return built
            built = ensure_image(
                client,
                spec.lockfile,
                spec.base_image or self.base_image,
                images.template_for(spec.gpus),
                on_event,
                spec.cuda_index,
            )
        self._built[self._key(spec)] = built
        return built

    def execute(self, spec: RunSpec, on_event: OnEvent) -> RunResult:
        """Run the command in a fresh container, streaming its output; always removes it.

        Raises:
            BackendUnavailable: the engine went away, or GPUs were asked for and are absent.
        """
        built = self._built.get(self._key(spec))
        if built is None:
            self.prepare(spec, on_event)
            built = self._built[self._key(spec)]
        uid, gid = _container_user()
        work = spec.runtime_dir.parent
        tree = work / scratch.TREE
        scratch.make(spec.project_root, tree, [*spec.data, *spec.outputs])
        writable = [*_writable_dirs(spec), tree]
        for path in writable:
            path.mkdir(parents=True, exist_ok=True)
        tops = [spec.project_root, spec.data_root or spec.project_root]
        saved = owners.open_for(uid, gid, writable, tops, work / owners.STATE)
        config = _container_config(spec, built, uid, gid, tree)
        try:
            with engine() as client:
                result = _run_container(client, config, spec, built, on_event)
        except BaseException:
            owners.restore(saved)
            (work / owners.STATE).unlink(missing_ok=True)
            raise
        # What the command wrote into its copy of the project lands where a local run puts it;
        # a repro killed before this line leaves the copy to `repro resume` or `repro gc`.
        result.written = scratch.recover(work, spec.project_root)
        return result


def _check_gpus(client: docker.DockerClient) -> None:
    """Refuse early (before building a CUDA image) when the engine plainly cannot give GPUs."""
    runtimes = client.info().get("Runtimes") or {}
    if "nvidia" in runtimes or any(shutil.which(tool) for tool in _GPU_TOOLS):
        return
    raise BackendUnavailable(
        "GPUs were asked for, but the Docker engine has no NVIDIA runtime", hint=GPU_HINT
    )


def _container_user() -> tuple[int, int]:
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:
        return FALLBACK_UID, FALLBACK_UID
    return uid, gid


def _writable_dirs(spec: RunSpec) -> list[Path]:
    return [spec.runtime_dir, *(spec.project_root / rel for rel in spec.outputs)]


def _in_work(rel: str) -> str:
    return posixpath.normpath(posixpath.join(WORK, rel.replace(os.sep, "/")))


def _mountpoint(host_parent: Path, rel: str, is_dir: bool) -> None:
    """Make sure a nested mount's target exists under the read-only /work mount."""
    target = host_parent / rel
    if target.exists():
        return
    if is_dir:
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()


def _volumes(spec: RunSpec, tree: Path) -> dict[str, dict[str, str]]:
    """The project's writable copy at /work, data read-only and the output dirs writable over it."""
    inject, lib = runtime_source()
    volumes = {
        str(tree.resolve()): {"bind": WORK, "mode": "rw"},
        str(inject): {"bind": INJECT, "mode": "ro"},
        str(lib / "repro"): {"bind": f"{LIB}/repro", "mode": "ro"},
        str(spec.runtime_dir.resolve()): {"bind": RUNTIME, "mode": "rw"},
    }
    data_root = (spec.data_root or spec.project_root).resolve()
    for rel in spec.data:
        source = data_root / rel
        _mountpoint(tree, rel, source.is_dir())
        volumes[str(source)] = {"bind": _in_work(rel), "mode": "ro"}
    for rel in spec.outputs:
        _mountpoint(tree, rel, True)
        volumes[str((spec.project_root / rel).resolve())] = {"bind": _in_work(rel), "mode": "rw"}
    return volumes


def _device_requests(gpus: str | None) -> list[DeviceRequest] | None:
    if not gpus:
        return None
    if gpus == "all":
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    if gpus.isdigit():
        return [DeviceRequest(count=int(gpus), capabilities=[["gpu"]])]
    return [DeviceRequest(device_ids=gpus.split(","), capabilities=[["gpu"]])]


def _container_config(spec: RunSpec, built: BuiltImage, uid: int, gid: int, tree: Path) -> dict[str, Any]:
    env = dict(spec.env)
    env.update(
        {
            "PYTHONPATH": f"{INJECT}:{LIB}",
            RUNTIME_ENV_DIR: RUNTIME,
            PROJECT_ENV: WORK,
            "HOME": "/tmp",
        }
    )
    run_id = spec.env.get(contract.RUN_ID_ENV, "")
    command = merge_pythonpath(
        launch_argv(spec.argv, spec.nproc_per_node, log_dir=f"{RUNTIME}/{RANK_LOGS}", torchrun=spec.torchrun),
        f"{INJECT}:{LIB}",
    )
    return {
        "image": built.id,
        "command": _on_terminal(command, spec),
        "environment": env,
        "working_dir": _in_work(spec.workdir),
        "user": f"{uid}:{gid}",
        "hostname": "repro",
        "labels": _labels(spec, run_id),
        "name": f"repro-{run_id}" if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", run_id) else None,
        "host_config": {
            "binds": _volumes(spec, tree),
            "network_mode": "bridge" if spec.network else "none",
            "shm_size": spec.shm_size,
            "device_requests": _device_requests(spec.gpus),
            "auto_remove": False,
            "init": True,  # signals reach the command and DataLoader workers get reaped
            "security_opt": ["no-new-privileges"],  # no setuid binary lifts the container user
        },
    }


def _on_terminal(command: list[str], spec: RunSpec) -> list[str]:
    """The command under repro's launcher when some of its streams end on a terminal: it gives
    those streams a pseudo-terminal inside the container and relays both, in the order they
    came, as frames on the container's stdout (a container TTY would merge them into one)."""
    tty = spec.terminal or Terminal()
    if not tty.streams:
        return command
    streams, size = tty.streams, f"{tty.columns}x{tty.lines}"
    launcher = f"{LIB}/repro/runtime/{Path(terminal.__file__).name}"
    return ["python3", "-I", "-S", launcher, "--tty", ",".join(streams), "--size", size, "--", *command]


# How tini (the container's init) and repro's launcher say the command could not start.
_EXEC_FAILED = re.compile(
    rb"^(?:\[FATAL tini \(\d+\)\]|repro:) exec (.+?) failed: (No such file or directory|Permission denied)"
)


def _refuse_unstartable(code: int, spec: RunSpec) -> None:
    """The command never started in the container: the usage error the local backend gives,
    not a failed run.

    Raises:
        UsageError: the command is not in the image, or not executable.
    """
    if code not in (terminal.NOT_FOUND, terminal.NOT_EXECUTABLE) or not spec.stderr_path.is_file():
        return
    with open(spec.stderr_path, "rb") as f:
        found = _EXEC_FAILED.match(f.read(4096))
    if found is None:
        return
    name = found.group(1).decode("utf-8", "replace")
    if found.group(2) == b"Permission denied":
        raise UsageError(f"command is not executable in the image: {name}")
    raise UsageError(
        f"command not found: {name}",
        hint="check the command after `repro run --` (it runs in the run's image; repro's options go "
        "before it)",
    )


def _labels(spec: RunSpec, run_id: str) -> dict[str, str]:
    labels = {LABEL_PID: str(os.getpid()), LABEL_HOST: socket.gethostname()}
    if run_id:
        labels[LABEL_RUN] = run_id
    if spec.store_dir is not None:
        labels[LABEL_STORE] = str(spec.store_dir.resolve())
    return labels


def _run_container(
    client: docker.DockerClient, config: dict[str, Any], spec: RunSpec, built: BuiltImage, on_event: OnEvent
) -> RunResult:
    api = client.api
    host_config = api.create_host_config(**config.pop("host_config"))
    try:
        container = api.create_container(host_config=host_config, **config)
    except docker.errors.APIError as e:
        if e.status_code != 409 or not config.get("name"):
            raise
        config["name"] = None  # a leftover container of the same name: run unnamed
        container = api.create_container(host_config=host_config, **config)
    cid = str(container["Id"])
    details: dict[str, Any] = {
        "project_root": WORK,  # where the code ran: a replay elsewhere masks it in stdout like any root
        "container": cid[:12],
        "image_id": built.id,
        "image_tag": built.tag,
        "user": config["user"],
        "network": "bridge" if spec.network else "none",
        "gpus": spec.gpus,
        "shm_size": spec.shm_size,
        "workdir": config["working_dir"],
    }
    details.update((spec.terminal or Terminal()).details())
    start = time.monotonic()
    reaper = _start_reaper(cid)
    try:
        try:
            interrupted = _stream_output(api, cid, spec, on_event)
            if interrupted:
                raise KeyboardInterrupt
            status = api.wait(cid, timeout=None)
        except KeyboardInterrupt:
            _stop_quietly(api, cid)
            return RunResult(130, time.monotonic() - start, interrupted=True, details=details, image=built)
        duration = time.monotonic() - start
        state = api.inspect_container(cid).get("State", {})
        details["oom_killed"] = bool(state.get("OOMKilled"))
        code = int(status.get("StatusCode", 1))
        _refuse_unstartable(code, spec)
        return RunResult(code, duration, details=details, image=built)
    finally:
        _remove_quietly(api, cid)
        _stop_reaper(reaper)


def _stream_output(api: docker.APIClient, cid: str, spec: RunSpec, on_event: OnEvent) -> bool:
    """Attach, start, and pass stdout/stderr on to their files and to "output" events as the
    bytes come.

    Ctrl-C while streaming stops the container (SIGINT first) and keeps reading until
    its output ends, so the script's last words are kept. Returns whether it was interrupted.

    Raises:
        OSError: a log file could not be written (once the output ended).
    """
    stream = api.attach(cid, stdout=True, stderr=True, stream=True, logs=True, demux=True)
    paths = {"stdout": spec.stdout_path, "stderr": spec.stderr_path}
    ttys = (spec.terminal or Terminal()).streams
    output = CommandOutput(paths, on_event, ttys=ttys, mode="wb")
    frames = terminal.Frames() if ttys else None  # the launcher's stdout is framed
    interrupted = False
    try:
        api.start(cid)
        chunks_iter = iter(stream)
        while True:
            try:
                chunks = next(chunks_iter)
                for name, data in zip(STREAMS, chunks, strict=True):
                    if data and frames is not None and name == "stdout":
                        for framed, payload in frames.feed(data):
                            output.write(framed, payload)
                    elif data:
                        output.write(name, data)
            except StopIteration:
                break
            except KeyboardInterrupt:
                if interrupted:
                    continue
                interrupted = True
                on_event(Event("info", "interrupted: stopping the container"))
                _stop_quietly(api, cid)
    finally:
        _release(stream)
        if frames is not None:
            output.write("stdout", frames.flush())
        output.close()
    if output.failures:
        raise output.failures[0]
    return interrupted


def _release(stream: Any) -> None:
    """Close an attach stream. `close()` shuts the socket down, but docker-py keeps the
    hijacked HTTP response (and with it the file descriptor) in a reference cycle, so the
    response is closed too; otherwise the descriptor lingers until a garbage collection."""
    stream.close()
    response = getattr(stream, "_response", None)
    if response is not None:
        with contextlib.suppress(OSError, ValueError):
            response.close()


# The reaper: a small process that outlives a killed repro and removes its container. It
# waits on a pipe; "done" means repro removed the container itself, end-of-file means
# repro died (SIGKILL included) and the container must go.
_REAPER = (
    "import sys\n"
    "if sys.stdin.readline().strip() != 'done':\n"
    "    from repro.backends.docker import reap\n"
    "    reap(sys.argv[1])\n"
)


def _start_reaper(cid: str) -> subprocess.Popen[bytes] | None:
    try:
        return subprocess.Popen(
            [sys.executable, "-c", _REAPER, cid],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C and a killed process group leave it running
            env={**os.environ, "PYTHONPATH": str(runtime_source()[1])},
        )
    except OSError:
        return None  # `repro gc` still finds the container by its labels


def _stop_reaper(reaper: subprocess.Popen[bytes] | None) -> None:
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


def _stop_quietly(api: docker.APIClient, cid: str) -> None:
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


def _remove_quietly(api: docker.APIClient, cid: str) -> None:
    try:
        api.remove_container(cid, force=True, v=True)
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        pass


# --------------------------------------------------------------------------- housekeeping


@dataclass
class ImageEntry:
    """One image `repro gc --images` looked at."""

    id: str
    tags: list[str]
    size: int  # bytes only this image holds: what removing it alone frees


@dataclass
class ImageSweep:
    """What `remove_images` removed (or, on a dry run, would remove), kept, and found gone."""

    removed: list[ImageEntry] = field(default_factory=list)
    kept: list[tuple[ImageEntry, str]] = field(default_factory=list)  # with the reason
    gone: list[str] = field(default_factory=list)  # ids the engine no longer has
    freed: int | None = None  # bytes the engine's layer storage shrank by (None on a dry run)


def remove_images(candidates: Iterable[str], base: str, dry_run: bool = False) -> ImageSweep:
    """Remove the images ``candidates`` names by id — the only images this may touch — except the
    base image ``base``, an image someone tagged outside ``repro-env``, one other images were built
    on, and one a container uses: those are kept, with the reason.

    Raises:
        BackendUnavailable: no engine answers.
    """
    sweep = ImageSweep()
    with engine() as client:
        usage = client.api.df()
        sizes = {
            str(i["Id"]): int(i.get("Size") or 0) - int(i.get("SharedSize") or 0) for i in usage["Images"]
        }
        base_id = _image_id(client, base)
        family = _Family(client)
        for image_id in dict.fromkeys(candidates):
            found = _inspect_or_none(client, image_id)
            if found is None:
                sweep.gone.append(image_id)
                continue
            tags = [t for t in (found.get("RepoTags") or []) if t != "<none>:<none>"]
            entry = ImageEntry(image_id, tags, max(0, sizes.get(image_id, 0)))
            why = _why_kept(client, entry, base_id, family)
            if why is None and not dry_run:
                why = _remove_image(client, entry)
            if why is None:
                sweep.removed.append(entry)
            else:
                sweep.kept.append((entry, why))
        if sweep.removed and not dry_run:
            sweep.freed = max(0, int(usage["LayersSize"]) - int(client.api.df()["LayersSize"]))
    return sweep


def _inspect_or_none(client: docker.DockerClient, ref: str) -> dict[str, Any] | None:
    try:
        return dict(client.api.inspect_image(ref))
    except docker.errors.ImageNotFound:
        return None


class _Family:
    """Which images were built on which: the engine's parent links (the classic builder) and, for
    BuildKit builds that leave none, an image that carries another's repro labels and extends its
    layers."""

    def __init__(self, client: docker.DockerClient) -> None:
        self.client = client
        listed = client.api.images(all=True)
        self.parents = {str(i["Id"]): str(i.get("ParentId") or "") for i in listed}
        self.tags = {
            str(i["Id"]): [t for t in i.get("RepoTags") or [] if t != "<none>:<none>"] for i in listed
        }
        self.leaves = [str(i["Id"]) for i in client.api.images()]
        self._inspected: dict[str, dict[str, Any] | None] = {}

    def _inspect(self, image_id: str) -> dict[str, Any] | None:
        if image_id not in self._inspected:
            self._inspected[image_id] = _inspect_or_none(self.client, image_id)
        return self._inspected[image_id]

    def _descends(self, image_id: str, ancestor: str) -> bool:
        up, seen = self.parents.get(image_id, ""), 0
        while up and seen < 10_000:
            if up == ancestor:
                return True
            up, seen = self.parents.get(up, ""), seen + 1
        return False

    def child_of(self, image_id: str) -> str | None:
        """An image built on ``image_id`` (by its tag when one is tagged), if there is one."""
        children = [other for other in self.parents if self._descends(other, image_id)]
        if not children:
            children = [
                other for other in self.leaves if other != image_id and self._extends(other, image_id)
            ]
        if not children:
            return None
        named = [tag for child in children for tag in self.tags.get(child, [])]
        return named[0] if named else children[0].removeprefix("sha256:")[:12]

    def _extends(self, other: str, image_id: str) -> bool:
        """Whether ``other`` carries ``image_id``'s repro labels, was made after it and extends its
        layers: what an image built on it with BuildKit (no parent link) looks like."""
        ours, theirs = self._inspect(image_id) or {}, self._inspect(other) or {}
        labels = _own_labels(ours)
        if not labels or not labels.items() <= _own_labels(theirs).items():
            return False  # a child inherits every label of the image it was built on
        if str(theirs.get("Created", "")) <= str(ours.get("Created", "")):
            return False  # an image made before this one was not built on it
        layers = list((ours.get("RootFS") or {}).get("Layers") or [])
        return list((theirs.get("RootFS") or {}).get("Layers") or [])[: len(layers)] == layers


def _own_labels(inspected: dict[str, Any]) -> dict[str, str]:
    labels = (inspected.get("Config") or {}).get("Labels") or {}
    return {k: str(v) for k, v in labels.items() if k.startswith(images.LABEL_PREFIX)}


def _why_kept(
    client: docker.DockerClient, entry: ImageEntry, base_id: str | None, family: _Family
) -> str | None:
    if entry.id == base_id:
        return "it is the base image (image.base)"
    foreign = [t for t in entry.tags if not images.is_own_tag(t)]
    if foreign:
        return f"it is also tagged {', '.join(foreign[:3])}"
    child = family.child_of(entry.id)
    if child is not None:
        return f"image {child} was built on it"
    if client.api.containers(all=True, filters={"ancestor": entry.id}):
        return "a container uses it"
    return None


def _remove_image(client: docker.DockerClient, entry: ImageEntry) -> str | None:
    """Remove one image, its repro-env tags first, never forced; the engine's refusal, if it refuses."""
    try:
        for ref in [*entry.tags, entry.id]:
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.api.remove_image(ref)
    except docker.errors.APIError as e:
        return f"the engine refused: {e.explanation or e}"
    return None


def remove_stale_containers(store_dir: Path, dry_run: bool = False) -> list[str]:
    """Remove containers of this store whose repro process is gone; returns their names.

    Only containers labelled with this store's path, started on this host, qualify: the
    engine may be shared, and another store's or another live run's containers stay.

    Raises:
        BackendUnavailable: no engine answers.
    """
    store = str(store_dir.resolve())
    host = socket.gethostname()
    removed: list[str] = []
    with engine() as client:
        for item in client.api.containers(all=True, filters={"label": f"{LABEL_STORE}={store}"}):
            labels = item.get("Labels") or {}
            pid = labels.get(LABEL_PID, "")
            if labels.get(LABEL_HOST) != host or not pid.isdigit() or pid_alive(int(pid)):
                continue
            name = ((item.get("Names") or [""])[0] or str(item["Id"])[:12]).lstrip("/")
            if not dry_run:
                with contextlib.suppress(docker.errors.NotFound):
                    client.api.remove_container(item["Id"], force=True, v=True)
            removed.append(name)
    return removed

    return True


def live_containers(store_dir: Path, run_id: str) -> list[str]:
    """Names of the containers of run ``run_id`` (of this store) that are not stopped yet.

    None when no engine answers: a container cannot run without its engine.
    """
    if not engine_available():
        return []
    filters = {"label": [f"{LABEL_STORE}={store_dir.resolve()}", f"{LABEL_RUN}={run_id}"]}
    with engine() as client:
        found = client.api.containers(all=True, filters=filters)
    return [
        ((item.get("Names") or [""])[0] or str(item["Id"])[:12]).lstrip("/")
        for item in found
        if item.get("State") not in _STOPPED
    ]


_STOPPED = ("created", "exited", "dead")  # states in which no process of the container runs
