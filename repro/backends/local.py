"""The local backend: the current machine and interpreter, in a process group of its own."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from repro.backends.base import (
    PROJECT_ENV,
    RUNTIME_ENV_DIR,
    BuiltImage,
    OnEvent,
    RunResult,
    RunSpec,
    Terminal,
    launch_argv,
    link_data,
    merge_pythonpath,
    runtime_source,
)
from repro.backends.output import CommandOutput
from repro.errors import BackendUnavailable, UsageError
from repro.runtime import contract
from repro.runtime.contract import RANK_LOGS
from repro.runtime.terminal import open_pty, read_chunks

# Variables of the calling shell that would defeat the mode (they are set by the run itself), and the
# shell's idea of its width: the command's terminal size is the pseudo-terminal's (a replay's is the
# recorded one), as in a container, never the width of whatever shell replays it.
_SCRUB = (
    "PYTHONHASHSEED", "PYTHONSTARTUP", contract.BOOT_PID_ENV, "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "COLUMNS", "LINES",
)  # fmt: skip


class LocalBackend:
    """Runs the command with this interpreter (`python` in argv means sys.executable)."""

    name = "local"

    def prepare(self, spec: RunSpec, on_event: OnEvent) -> BuiltImage | None:
        """Check that the GPUs asked for are here; nothing to build.

        Raises:
            BackendUnavailable: GPUs asked for and none (or too few) visible.
        """
        if spec.gpus:
            check_gpus(spec.gpus, _gpu_count())
        return None

    def environment(self, spec: RunSpec) -> dict[str, str]:
        inject, package_parent = runtime_source()
        env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
        env.update(spec.env)
        extra = env.get("PYTHONPATH")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(inject), str(package_parent), extra) if p)
        env[RUNTIME_ENV_DIR] = str(spec.runtime_dir)
        env[PROJECT_ENV] = str(spec.project_root)
        if spec.gpus and spec.gpus != "all" and "CUDA_VISIBLE_DEVICES" not in spec.env:
            env["CUDA_VISIBLE_DEVICES"] = visible_devices(spec.gpus)
        return env

    def execute(self, spec: RunSpec, on_event: OnEvent) -> RunResult:
        log_dir = str(spec.runtime_dir / RANK_LOGS)
        argv = launch_argv(
            spec.argv, spec.nproc_per_node, python=sys.executable, log_dir=log_dir, torchrun=spec.torchrun
        )
        if argv and argv[0] in ("python", "python3"):
            argv[0] = sys.executable
        argv = merge_pythonpath(argv, os.pathsep.join(str(p) for p in runtime_source()))
        link_data(spec)
        for rel in spec.outputs:
            (spec.project_root / rel).mkdir(parents=True, exist_ok=True)
        cwd = spec.project_root / spec.workdir
        start = time.monotonic()
        terminal = spec.terminal or Terminal()
        ends = _open_streams(terminal)
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=self.environment(spec),
                stdin=subprocess.DEVNULL,
                stdout=ends["stdout"][1],
                stderr=ends["stderr"][1],
                start_new_session=True,  # its own process group: torchrun ranks and workers stop with it
                preexec_fn=_die_with(os.getpid()),
            )
        except FileNotFoundError as e:
            _close_all(ends)
            raise UsageError(
                f"command not found: {argv[0]}", hint="check the command after `repro run --`"
            ) from e
        except PermissionError as e:
            _close_all(ends)
            raise UsageError(f"command is not executable: {argv[0]}") from e
        for _, theirs in ends.values():
            os.close(theirs)
        paths = {"stdout": spec.stdout_path, "stderr": spec.stderr_path}
        output = CommandOutput(paths, on_event, ttys=terminal.streams)
        pump = _pump({name: ours for name, (ours, _) in ends.items()}, output)
        interrupted = False
        try:
            code = proc.wait()
        except KeyboardInterrupt:
            interrupted = True
            code = _stop(proc)
        finally:
            _kill_group(proc.pid)
            _kill_leftovers(spec.env.get(contract.RUN_ID_ENV))
            pump.join(timeout=10)
            output.close()
        if output.failures:
            raise output.failures[0]  # the log could not be written (a full disk): the CLI names the path
        details = {"python": sys.executable, "project_root": str(spec.project_root), **terminal.details()}
        return RunResult(
            exit_code=130 if interrupted else code,
            duration_s=time.monotonic() - start,
            interrupted=interrupted,
            details=details,
        )


def _open_streams(terminal: Terminal) -> dict[str, tuple[int, int]]:
    """(our end, the command's end) per stream: a pseudo-terminal where the stream ends on a
    terminal, else a pipe."""
    ends: dict[str, tuple[int, int]] = {}
    for name in ("stdout", "stderr"):
        if getattr(terminal, name):
            ends[name] = open_pty(terminal.columns, terminal.lines)
        else:
            ends[name] = os.pipe()
    return ends


def _close_all(ends: dict[str, tuple[int, int]]) -> None:
    for pair in ends.values():
        for fd in pair:
            os.close(fd)


def _pump(fds: dict[str, int], output: CommandOutput) -> threading.Thread:
    """Pass both streams on as their bytes come, in the order they come (one reader for both)."""

    def run() -> None:
        for name, data in read_chunks(fds):
            try:
                output.write(name, data)
            except Exception:  # showing it failed: keep draining, so the command never blocks on a write
                output.mute()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _die_with(parent: int) -> Callable[[], None]:
    """A pre-exec hook: the command gets SIGKILL when repro dies, even by SIGKILL (Linux)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    except (OSError, AttributeError):
        prctl = None

    def hook() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # repro died before the hook ran
            os._exit(137)

    return hook


_PR_SET_PDEATHSIG = 1


def _stop(proc: subprocess.Popen[bytes]) -> int:
    """Ctrl-C: pass SIGINT to the group, then SIGTERM, then SIGKILL."""
    for sig, wait in ((signal.SIGINT, 5.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            return proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        except KeyboardInterrupt:
            continue
    return proc.wait()


def _kill_group(pgid: int) -> None:
    """Leave no orphans: whatever is left of the command's process group goes."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_leftovers(run_id: str | None) -> None:
    """Kill what escaped the group: torchrun starts each rank in a session of its own.

    Every process of the run carries its REPRO_RUN_ID from the start, so a scan of
    /proc finds ranks and their children even when they left the command's group.
    """
    if not run_id or not os.path.isdir("/proc"):
        return
    for pid in run_processes(run_id):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_processes(run_id: str) -> list[int]:
    """Live processes started with REPRO_RUN_ID=``run_id`` in their environment (Linux /proc)."""
    needle = f"{contract.RUN_ID_ENV}={run_id}".encode()
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for name in entries:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(name))
    return found


def visible_devices(gpus: str) -> str:
    """CUDA_VISIBLE_DEVICES for ``--gpus``: a count N → the first N devices, else the ids as given."""
    if gpus.isdigit():
        return ",".join(str(i) for i in range(int(gpus)))
    return ",".join(g.strip() for g in gpus.split(",") if g.strip())


def check_gpus(gpus: str, available: int) -> None:
    """Refuse a run that asks for more GPUs than this machine shows.

    Raises:
        BackendUnavailable: none visible, or fewer than a count asked for.
    """
    hint = "drop --gpus to run on the CPU, or run where `nvidia-smi` lists enough GPUs"
    if available == 0:
        raise BackendUnavailable(
            f"--gpus {gpus} was asked for, but no NVIDIA GPU is visible on this machine", hint=hint
        )
    wanted = int(gpus) if gpus.isdigit() else (len(gpus.split(",")) if gpus != "all" else 1)
    if wanted > available:
        raise BackendUnavailable(
            f"--gpus {gpus} was asked for, but this machine shows {available} NVIDIA GPU(s)", hint=hint
        )


def _gpu_count() -> int:
    from repro.facts.env import gpus

    return len(gpus()[0])
