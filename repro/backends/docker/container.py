"""Running the user's command in a container: mounts, user, GPUs, labels, streamed output."""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import shutil
import socket
import time
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.types import DeviceRequest

from repro.backends.base import (
    PROJECT_ENV,
    RUNTIME_ENV_DIR,
    BuiltImage,
    Event,
    OnEvent,
    RunResult,
    RunSpec,
    Terminal,
    launch_argv,
    merge_pythonpath,
    runtime_source,
)
from repro.backends.docker.engine import GPU_HINT, LABEL_HOST, LABEL_PID, LABEL_RUN, LABEL_STORE
from repro.backends.docker.reaper import remove_quietly, start_reaper, stop_quietly, stop_reaper
from repro.backends.output import CommandOutput
from repro.errors import BackendUnavailable, UsageError
from repro.runtime import contract, terminal
from repro.runtime.contract import RANK_LOGS
from repro.runtime.terminal import STREAMS

# Where things appear inside the container.
WORK = "/work"
INJECT = "/opt/repro/inject"
LIB = "/opt/repro/lib"
RUNTIME = "/opt/repro/run"
FALLBACK_UID = 1000  # the container user when the host user is root
# Raw HostConfig fields another engine with the Docker API takes beyond the SDK's checks (Podman's
# ``UsernsMode: keep-id``): a container config may carry them under this key.
HOST_EXTRA = "host_extra"
_GPU_TOOLS = ("nvidia-container-runtime-hook", "nvidia-container-runtime", "nvidia-ctk")


def check_gpus(client: docker.DockerClient) -> None:
    """Refuse early (before building a CUDA image) when the engine plainly cannot give GPUs."""
    runtimes = client.info().get("Runtimes") or {}
    if "nvidia" in runtimes or any(shutil.which(tool) for tool in _GPU_TOOLS):
        return
    raise BackendUnavailable(
        "GPUs were asked for, but the Docker engine has no NVIDIA runtime", hint=GPU_HINT
    )


def container_user() -> tuple[int, int]:
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:
        return FALLBACK_UID, FALLBACK_UID
    return uid, gid


def writable_dirs(spec: RunSpec) -> list[Path]:
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


def container_config(
    spec: RunSpec, built: BuiltImage, uid: int, gid: int, tree: Path, shm_size: str
) -> dict[str, Any]:
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
            "shm_size": shm_size,
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


def run_container(
    client: docker.DockerClient, config: dict[str, Any], spec: RunSpec, built: BuiltImage, on_event: OnEvent
) -> RunResult:
    api = client.api
    asked = config.pop("host_config")
    host_config = api.create_host_config(**asked)
    host_config.update(config.pop(HOST_EXTRA, None) or {})
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
        "shm_size": asked["shm_size"],
        "workdir": config["working_dir"],
    }
    details.update((spec.terminal or Terminal()).details())
    start = time.monotonic()
    reaper = start_reaper(cid)
    try:
        try:
            interrupted = _stream_output(api, cid, spec, on_event)
            if interrupted:
                raise KeyboardInterrupt
            status = api.wait(cid, timeout=None)
        except KeyboardInterrupt:
            stop_quietly(api, cid)
            return RunResult(130, time.monotonic() - start, interrupted=True, details=details, image=built)
        duration = time.monotonic() - start
        state = api.inspect_container(cid).get("State", {})
        details["oom_killed"] = bool(state.get("OOMKilled"))
        code = int(status.get("StatusCode", 1))
        _refuse_unstartable(code, spec)
        return RunResult(code, duration, details=details, image=built)
    finally:
        remove_quietly(api, cid)
        stop_reaper(reaper)


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
                stop_quietly(api, cid)
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
