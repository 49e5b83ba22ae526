"""Podman's Docker-compatible API for one run: `podman system service` started by repro, as this user.

Rootless Podman has no daemon: repro starts ``podman system service --time=0`` on a socket in a private
directory of its own, talks to it with the docker backend's code (one code path for what both engines
share), and stops it when the run is done. Its failures to start become BackendUnavailable (exit 3),
naming the sysctl where user namespaces are disabled.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from repro.backends.base import Event, OnEvent
from repro.errors import BackendUnavailable, BuildError, NotFoundError

PODMAN = "podman"
START_S = 30.0  # how long the service may take to answer
BASE_HINT = (
    "make one without root: `repro base-image` (with Debian's mmdebstrap), or load one into your Podman "
    "storage: `docker save repro-base:bookworm | podman load` where an engine has it, or `podman load -i` "
    "an archive an administrator made"
)
HINT = "install Debian's podman and uidmap (`scripts/podman-up.sh` as root), or use `--backend docker`"
USERNS_HINT = (
    "user namespaces are disabled here: `sysctl -w kernel.unprivileged_userns_clone=1` "
    "(and user.max_user_namespaces > 0), as root"
)
_SYSCTLS = (("/proc/sys/kernel/unprivileged_userns_clone", "kernel.unprivileged_userns_clone"),
            ("/proc/sys/user/max_user_namespaces", "user.max_user_namespaces"))  # fmt: skip


def userns_disabled() -> str | None:
    """The sysctl that disables user namespaces for this user, or None."""
    if os.getuid() == 0:
        return None
    for path, name in _SYSCTLS:
        with contextlib.suppress(OSError, ValueError):
            if int(Path(path).read_text().strip()) == 0:
                return name
    return None


def _answers(path: Path) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(1.0)
        sock.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        sock.close()


class Service:
    """One `podman system service` of this user on a private socket; `url` while it runs."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self.started_s = 0.0  # how long it took to answer

    @property
    def url(self) -> str:
        assert self._dir is not None
        return f"unix://{self._dir / 'podman.sock'}"

    @property
    def running(self) -> bool:
        """Whether the service process is up (started and not exited)."""
        return self._proc is not None and self._proc.poll() is None

    def owner(self) -> str | None:
        """ "<pid>:<directory>" of the running service (for a reaper to stop it), or None."""
        if self._proc is None or self._dir is None:
            return None
        return f"{self._proc.pid}:{self._dir}"

    def start(self) -> None:
        """Start the service and wait until its socket answers (no-op while it runs).

        Raises:
            BackendUnavailable: no podman here, user namespaces disabled, or the service did not answer.
        """
        if self.running:
            return
        if shutil.which(PODMAN) is None:
            raise BackendUnavailable("no `podman` command here", hint=HINT)
        if sysctl := userns_disabled():
            raise BackendUnavailable(
                f"rootless Podman needs user namespaces ({sysctl} is 0)", hint=USERNS_HINT
            )
        began = time.monotonic()
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        self._dir = Path(tempfile.mkdtemp(prefix="repro-podman-", dir=runtime if runtime else None))
        log = (self._dir / "service.log").open("wb")
        with log:
            self._proc = subprocess.Popen(
                [PODMAN, "system", "service", "--time=0", self.url], stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, start_new_session=True,  # Ctrl-C stops the container, then this
            )  # fmt: skip
        self._wait(began)

    def _wait(self, began: float) -> None:
        assert self._proc is not None and self._dir is not None
        sock = self._dir / "podman.sock"
        while time.monotonic() - began < START_S:
            if self._proc.poll() is not None:
                break
            if sock.exists() and _answers(sock):
                self.started_s = time.monotonic() - began
                return
            time.sleep(0.02)
        tail = self._log_tail()
        self.stop()
        hint = USERNS_HINT if "namespace" in tail.lower() else HINT
        raise BackendUnavailable(f"`podman system service` did not answer: {tail or 'no output'}", hint=hint)

    def _log_tail(self) -> str:
        assert self._dir is not None
        with contextlib.suppress(OSError):
            lines = [
                line for line in (self._dir / "service.log").read_text("utf-8", "replace").splitlines()
                if line.strip() and "is not a shared mount" not in line
            ]  # fmt: skip
            return lines[-1].strip() if lines else ""
        return ""

    def stop(self) -> None:
        """Stop the service and remove its socket's directory (idempotent)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def has_image(ref: str) -> bool:
    """Whether this user's Podman storage holds image ``ref`` (False without podman)."""
    if shutil.which(PODMAN) is None or userns_disabled():
        return False
    try:
        done = subprocess.run(
            [PODMAN, "image", "exists", ref], stdin=subprocess.DEVNULL, capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def usable() -> bool:
    """Whether rootless Podman can run here: a user other than root (root has Docker's engine), the
    command exists, and user namespaces are enabled."""
    return os.getuid() != 0 and shutil.which(PODMAN) is not None and userns_disabled() is None


def image_id(ref: str) -> str | None:
    """The id (``sha256:…``) of the image ``ref`` names in this user's Podman storage, or None."""
    try:
        done = subprocess.run(
            [PODMAN, "image", "inspect", "--format", "{{.Id}}", ref],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = done.stdout.strip()
    return f"sha256:{found.removeprefix('sha256:')}" if done.returncode == 0 and found else None


def save_to(image: str, dest: Path, tag: str | None = None) -> int:
    """``podman save`` of ``image`` (docker-archive, as ``docker save`` writes; under ``tag`` when it
    names that image) at ``dest``; its size.

    Raises:
        BackendUnavailable: no usable podman here.
        NotFoundError: this user's Podman storage has no such image.
        BuildError: podman could not save it.
    """
    if not usable():
        raise BackendUnavailable("rootless Podman is not usable here to save the run's image", hint=HINT)
    if not has_image(image):
        raise NotFoundError(
            f"your Podman storage has no image {image[:19]} to export",
            hint="replay the run once on Podman (it rebuilds the image), then export again",
        )
    ref = tag if tag and image_id(tag) == image else image
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    try:
        done = subprocess.run(
            [PODMAN, "save", "--format=docker-archive", "-o", str(tmp), ref],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        if done.returncode != 0:
            raise BuildError(f"`podman save` of the run's image failed: {done.stderr.strip()[-300:]}")
        os.replace(tmp, dest)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BuildError(f"`podman save` of the run's image failed: {e}") from e
    finally:
        tmp.unlink(missing_ok=True)
    return dest.stat().st_size


def save_archive(image: str, folder: Path, on_event: OnEvent) -> Path:
    """``podman save`` of ``image`` into ``folder``/<id>.tar, unless saved there before; its path.

    Raises:
        BuildError: podman could not save it.
    """
    dest = folder / f"{image.removeprefix('sha256:')[:64]}.tar"
    if dest.is_file():
        return dest
    folder.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    save_to(image, dest)
    size, took = dest.stat().st_size / 1e6, time.monotonic() - began
    on_event(Event("info", f"podman: saved the image for the nodes ({size:.0f} MB in {took:.1f}s)"))
    return dest


def import_rootfs(archive: Path, tag: str, changes: list[str]) -> str:
    """``podman import`` of a root filesystem tar as image ``tag`` in this user's storage; its id.

    Raises:
        BackendUnavailable: no usable podman here.
        BuildError: podman rejected the archive.
    """
    if not usable():
        raise BackendUnavailable("rootless Podman is not usable here to import the base image", hint=HINT)
    argv = [PODMAN, "import", *(f"--change={change}" for change in changes), str(archive), tag]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BuildError(f"`podman import` of {archive.name} failed: {e}") from e
    found = image_id(tag) if done.returncode == 0 else None
    if found is None:
        raise BuildError(f"`podman import` of {archive.name} failed: {done.stderr.strip()[-300:]}")
    return found
