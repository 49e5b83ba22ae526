"""Pseudo-terminals for a command's output: what lets a script under repro see a TTY.

When repro's own output goes to a terminal, the command's stdout and/or stderr get a
pseudo-terminal instead of a pipe, so the script sees ``isatty()`` true, as it would
without repro: tqdm draws its bars in place, libraries colour their output. The
terminal passes bytes through as written (no ``\\n`` → ``\\r\\n`` translation), so the
recorded logs keep the script's own bytes.

The local backend opens the pseudo-terminals on the host (``open_pty``, ``read_chunks``).
Inside a container this file is the launcher around the command::

    python3 -I -S terminal.py --tty stdout,stderr --size 120x40 -- COMMAND…

it gives the ``--tty`` streams a pseudo-terminal (the others a pipe), reads both in the
order their bytes come and writes them to its own stdout as frames (``Frames`` splits
them again on the host): the engine copies a container's stdout and stderr separately,
which would let a line of one overtake the other. It passes signals on to the command
and exits with the command's status; its own messages go to its stderr. Standard
library only, and run without site-packages: it is not a process of the run.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
from collections.abc import Callable, Iterator

STREAMS = ("stdout", "stderr")
HEADER = struct.Struct(">BI")  # a frame: the stream (1 stdout, 2 stderr), the length, then the bytes
NOT_FOUND = 127  # the shell's status for a command that is not there (tini's too)
NOT_EXECUTABLE = 126
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def open_pty(columns: int = 0, lines: int = 0) -> tuple[int, int]:
    """A pseudo-terminal pair (controller, terminal side) of ``columns`` × ``lines`` that passes
    output bytes through unchanged."""
    controller, side = os.openpty()
    attrs = termios.tcgetattr(side)
    attrs[1] &= ~termios.ONLCR  # keep "\n" as "\n": the log holds what the script wrote
    termios.tcsetattr(side, termios.TCSANOW, attrs)
    if columns > 0 and lines > 0:
        fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    return controller, side


def read_chunks(
    fds: dict[str, int], done: Callable[[], bool] | None = None, idle: float | None = None
) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) as they arrive on each of ``fds``, in arrival order, until every one has
    ended: end-of-file on a pipe, EIO on a pseudo-terminal whose last writer closed it. Each
    descriptor is closed when it ends.

    With ``idle`` seconds and a ``done`` callable: once ``done()`` is true, reading stops at
    the first quiet spell of ``idle`` seconds, even if a leftover process still holds a stream.
    """
    live = dict(fds)
    try:
        while live:
            finished = done is not None and done()
            wait = idle if finished else (0.2 if done is not None else None)
            ready, _, _ = select.select(list(live.values()), [], [], wait)
            if not ready and finished:
                return
            for name, fd in list(live.items()):
                if fd not in ready:
                    continue
                try:
                    data = os.read(fd, 65536)
                except OSError as e:
                    if e.errno != errno.EIO:
                        raise
                    data = b""
                if not data:
                    os.close(live.pop(name))
                    continue
                yield name, data
    finally:
        for fd in live.values():
            os.close(fd)


class Frames:
    """Splits the launcher's framed stdout back into (stream, bytes), however the engine cut it."""

    def __init__(self) -> None:
        self._held = b""

    def feed(self, data: bytes) -> list[tuple[str, bytes]]:
        data, at, found = self._held + data, 0, []
        while len(data) - at >= HEADER.size:
            stream, size = HEADER.unpack_from(data, at)
            if stream not in (1, 2):  # not a frame (nothing else writes there): passed on as it is
                found.append(("stdout", data[at:]))
                at = len(data)
                break
            if len(data) - at - HEADER.size < size:
                break
            found.append((STREAMS[stream - 1], data[at + HEADER.size : at + HEADER.size + size]))
            at += HEADER.size + size
        self._held = data[at:]
        return found

    def flush(self) -> bytes:
        """What is left of an unfinished frame (nothing, unless the launcher was killed mid-write)."""
        rest, self._held = self._held, b""
        return rest


def _write_all(fd: int, data: bytes) -> None:
    while data:
        try:
            data = data[os.write(fd, data) :]
        except BrokenPipeError:
            return


def _parse(argv: list[str]) -> tuple[set[str], int, int, list[str]]:
    ttys: set[str] = set()
    columns = lines = 0
    while argv and argv[0] != "--":
        option, value = argv[0], argv[1] if len(argv) > 1 else ""
        if option == "--tty":
            ttys = {s for s in value.split(",") if s in STREAMS}
        elif option == "--size" and "x" in value:
            wide, _, high = value.partition("x")
            columns, lines = (int(wide), int(high)) if wide.isdigit() and high.isdigit() else (0, 0)
        argv = argv[2:]
    return ttys, columns, lines, argv[1:]


def main(argv: list[str]) -> int:
    """The container launcher: run the command with pseudo-terminals for the ``--tty`` streams."""
    ttys, columns, lines, command = _parse(argv)
    if not command:
        sys.stderr.write("usage: terminal.py --tty stdout,stderr [--size CxL] -- COMMAND…\n")
        return 2
    controllers: dict[str, int] = {}
    sides: dict[str, int] = {}
    for name in STREAMS:
        controllers[name], sides[name] = open_pty(columns, lines) if name in ttys else os.pipe()
    child: list[subprocess.Popen[bytes]] = []

    def forward(signum: int, frame: object) -> None:
        if child:
            try:
                os.kill(child[0].pid, signum)
            except ProcessLookupError:
                pass

    for sig in _FORWARDED:
        signal.signal(sig, forward)
    try:
        out, err = sides["stdout"], sides["stderr"]
        child.append(subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err))
    except (FileNotFoundError, PermissionError) as e:
        for fd in controllers.values():
            os.close(fd)
        why = "No such file or directory" if isinstance(e, FileNotFoundError) else "Permission denied"
        sys.stderr.write(f"repro: exec {command[0]} failed: {why}\n")
        return NOT_FOUND if isinstance(e, FileNotFoundError) else NOT_EXECUTABLE
    finally:
        for fd in sides.values():
            os.close(fd)
    proc = child[0]
    for name, data in read_chunks(controllers, done=lambda: proc.poll() is not None, idle=0.5):
        _write_all(1, HEADER.pack(STREAMS.index(name) + 1, len(data)) + data)
    code = proc.wait()
    if code < 0:  # killed by a signal: end the same way, so the container's status says so
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
