"""The command's output on its way: pseudo-terminals, the logs, the control codes kept out of them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from repro.backends.base import Event
from repro.backends.output import CommandOutput, ControlStripper
from repro.runtime import terminal


def test_control_sequences_leave_the_log_even_when_split_across_chunks() -> None:
    stream = (
        b"\x1b[32msaved\x1b[0m model\r\n"  # SGR colours
        b"\x1b]0;epoch 3\x07title set\n"  # an OSC title, ended by BEL
        b"\x1b[2K\x1b[1A\rstep 4/5\n"  # erase line, cursor up
        b"\x1b(Bplain\n"  # a charset designation
    )
    whole = ControlStripper().feed(stream)
    assert whole == b"saved model\r\ntitle set\n\rstep 4/5\nplain\n"
    for size in (1, 2, 3, 5, 7):
        stripper = ControlStripper()
        pieces = [stripper.feed(stream[i : i + size]) for i in range(0, len(stream), size)]
        assert b"".join(pieces) + stripper.flush() == whole, size


def test_a_stray_escape_is_kept_as_text_once_the_stream_ends() -> None:
    stripper = ControlStripper()
    assert stripper.feed(b"loss 0.1 \x1b[") == b"loss 0.1 "  # may be the start of a sequence: held
    assert stripper.flush() == b"\x1b["


def test_logs_keep_the_bytes_of_a_pipe_and_the_text_of_a_terminal(tmp_path: Path) -> None:
    events: list[Event] = []
    paths = {"stdout": tmp_path / "stdout.log", "stderr": tmp_path / "stderr.log"}
    output = CommandOutput(paths, events.append, ttys=["stderr"])
    output.write("stdout", b"\x1b[1mbold\x1b[0m\n")
    output.write("stderr", b"\r 50%|\x1b[3")
    output.write("stderr", b"2m##\x1b[0m|\r100%|####|\n")
    output.close()
    assert paths["stdout"].read_bytes() == b"\x1b[1mbold\x1b[0m\n"  # a pipe: the script's bytes as they were
    assert paths["stderr"].read_bytes() == b"\r 50%|##|\r100%|####|\n"  # a terminal's: the text, \r kept
    assert [(e.kind, e.stream) for e in events] == [
        ("output", "stdout"),
        ("output", "stderr"),
        ("output", "stderr"),
    ]
    assert events[2].data == b"2m##\x1b[0m|\r100%|####|\n"  # the terminal gets everything, as it came


def test_a_log_that_cannot_be_written_is_reported_and_the_output_still_passes(tmp_path: Path) -> None:
    events: list[Event] = []
    (tmp_path / "missing").write_text("a file where a directory should be")
    output = CommandOutput({"stdout": tmp_path / "missing" / "x" / "stdout.log"}, events.append)
    output.write("stdout", b"hello\n")
    output.close()
    assert output.failures and "stdout.log" in str(output.failures[0])
    assert events[-1].data == b"hello\n"


def test_a_pseudo_terminal_passes_newlines_through_and_has_the_size_asked(tmp_path: Path) -> None:
    controller, side = terminal.open_pty(123, 45)
    code = (
        "import os, sys; print(os.isatty(1), os.get_terminal_size(1).columns, os.get_terminal_size(1).lines)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=side, stdin=subprocess.DEVNULL)
    os.close(side)
    got = b"".join(data for _, data in terminal.read_chunks({"stdout": controller}))
    assert proc.wait() == 0
    assert got == b"True 123 45\n"  # "\n", not the terminal's usual "\r\n"


def _launch(ttys: str, command: list[str]) -> tuple[int, list[tuple[str, bytes]], bytes]:
    launcher = [sys.executable, "-I", "-S", terminal.__file__, "--tty", ttys, "--size", "90x20", "--"]
    done = subprocess.run([*launcher, *command], capture_output=True, timeout=60)
    frames = terminal.Frames()
    got = [frames.feed(done.stdout[i : i + 3]) for i in range(0, len(done.stdout), 3)]  # cut anywhere
    assert frames.flush() == b""
    runs: list[tuple[str, bytes]] = []  # consecutive pieces of one stream joined: how a terminal shows them
    for name, data in (piece for found in got for piece in found):
        if runs and runs[-1][0] == name:
            runs[-1] = (name, runs[-1][1] + data)
        else:
            runs.append((name, data))
    return done.returncode, runs, done.stderr


def test_the_launcher_gives_a_tty_and_keeps_both_streams_in_order_in_its_frames() -> None:
    script = (
        "import os, sys, time\n"
        "print('out', os.isatty(1), end='', flush=True)\n"
        "time.sleep(0.2)\n"
        "print(' more', flush=True)\n"
        "time.sleep(0.05)\n"  # writes to two streams are ordered as they came, not within microseconds
        "print('err', os.isatty(2), file=sys.stderr, flush=True)\n"
        "time.sleep(0.05)\n"
        "print('last', flush=True)\n"
        "sys.exit(3)\n"
    )
    code, pieces, own = _launch("stdout", [sys.executable, "-c", script])
    assert code == 3 and own == b""
    assert pieces == [("stdout", b"out True more\n"), ("stderr", b"err False\n"), ("stdout", b"last\n")]
    code, pieces, own = _launch("stdout,stderr", ["no-such-command-here"])
    assert code == terminal.NOT_FOUND and pieces == []
    assert own.startswith(b"repro: exec no-such-command-here failed: No such file or directory")


def test_the_launcher_passes_signals_on_and_ends_as_the_command_did(tmp_path: Path) -> None:
    import signal
    import time

    script = "import time\nprint('ready', flush=True)\ntime.sleep(60)\n"
    launcher = [sys.executable, "-I", "-S", terminal.__file__, "--tty", "stdout,stderr", "--"]
    proc = subprocess.Popen(
        [*launcher, sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    frames, seen = terminal.Frames(), b""
    while b"ready\n" not in seen:
        chunk = os.read(proc.stdout.fileno(), 4096)
        assert chunk, seen  # the launcher ended before the command said it was ready
        seen += b"".join(data for _, data in frames.feed(chunk))
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGTERM and time.monotonic() - start < 10
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()


def test_a_replay_takes_the_recorded_terminal_and_a_capsule_cannot_ask_for_an_absurd_one() -> None:
    from repro.backends.base import Terminal

    made = Terminal(stdout=False, stderr=True, columns=132, lines=40)
    assert made.details() == {"terminal": "stderr", "terminal_size": "132x40"}
    assert Terminal.recorded(made.details()) == made
    assert Terminal.recorded({}) == Terminal(columns=80, lines=24)  # a run through pipes: pipes again
    hostile = Terminal.recorded({"terminal": "stdout,stdin,../x", "terminal_size": "99999999x0"})
    assert hostile == Terminal(stdout=True, stderr=False, columns=1000, lines=1)
    assert Terminal.recorded({"terminal": ["stdout"], "terminal_size": {"x": 1}}).streams == []
