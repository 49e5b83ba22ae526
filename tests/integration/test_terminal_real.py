"""The command's output under `repro run` as a user sees it, on the local backend and a real engine.

On a real pseudo-terminal the script sees a TTY and its output is live (a partial line shows while
it sleeps, a tqdm bar redraws in place) while the recorded logs keep the text; through pipes its
stdout is repro's stdout and repro speaks on stderr; `--json` keeps stdout one JSON document;
-q/-v work after the subcommand; a docker build shows one line per stage and keeps the full log.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from repro.compare.stdout import split_lines
from tests.conftest import QUICKSTART_LOCK, Project

BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]
PAUSE = 3.0


def _env(**extra: str) -> dict[str, str]:
    # COLUMNS would win over the terminal's size: the size must come from the pseudo-terminal.
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR")}
    return {**env, "NO_COLOR": "1", **extra}


def _repro(*args: str) -> list[str]:
    return [sys.executable, "-m", "repro", *args]


def _on_terminal(argv: list[str], cwd: Path, columns: int = 100) -> tuple[int, list[tuple[float, bytes]]]:
    """Run ``argv`` with a real pseudo-terminal as its stdin, stdout and stderr; what it printed, with
    the time each piece arrived."""
    controller, side = os.openpty()
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    proc = subprocess.Popen(
        argv, cwd=cwd, env=_env(), stdin=side, stdout=side, stderr=side, start_new_session=True
    )
    os.close(side)
    start, chunks = time.monotonic(), []
    try:
        while select.select([controller], [], [], 300)[0]:
            try:
                data = os.read(controller, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not data:
                break
            chunks.append((time.monotonic() - start, data))
    finally:
        os.close(controller)
    return proc.wait(timeout=60), chunks


def _arrival(chunks: list[tuple[float, bytes]], needle: bytes) -> float:
    """When the first byte of ``needle`` reached the terminal."""
    seen = b""
    for at, data in chunks:
        seen += data
        if needle in seen:
            return at
    raise AssertionError(f"{needle!r} never reached the terminal: {seen!r}")


def _logs(project: Project) -> tuple[dict[str, Any], dict[str, bytes]]:
    record = json.loads(project.repro("show", "latest", "--json").out)
    blobs = project.root / ".repro" / "blobs"
    logs = {name: (blobs / d[:2] / d).read_bytes() for name, d in record["results"]["logs"].items()}
    return record, logs


@pytest.mark.parametrize("backend", BACKENDS)
def test_on_a_terminal_the_script_sees_a_tty_and_its_output_is_live(project: Project, backend: str) -> None:
    project.script("live_progress.py", "train.py")
    project.commit("train")
    code, chunks = _on_terminal(
        _repro("run", "--backend", backend, "train.py", "--pause", str(PAUSE)), project.root
    )
    shown = b"".join(data for _, data in chunks)
    assert code == 0, shown.decode(errors="replace")
    # The partial line was on the screen while the script slept, not when its line ended.
    assert _arrival(chunks, b" done") - _arrival(chunks, b"loading data...") >= PAUSE - 1.0
    assert b"loading data... done" in shown  # no prefix cut into the script's line
    assert b"tty True True 100" in shown  # a TTY of the user's terminal's size, as without repro
    assert shown.count(b"train:") >= 3 and b"\rtrain:" in shown  # the bar redraws in place
    assert b"\x1b[32msaved\x1b[0m model.pt" in shown  # the script's colours pass through
    record, logs = _logs(project)
    assert record["backend"]["details"]["terminal"] == "stdout,stderr"
    assert record["determinism"]["applied"] is True  # the launcher left the runtime to the script
    assert record["seeds"]["master"] and not record["warnings"][1:]
    # The recorded logs: the text, without the terminal's control codes; the bar's last state per line.
    assert logs["stdout"] == b"loading data... done\ntty True True 100\nsaved model.pt\n"
    bar = [text for _, text in split_lines(logs["stderr"].decode()) if text.startswith("train:")]
    assert bar and bar[-1].startswith("train: 100%") and "5/5" in bar[-1]
    assert b"\x1b" not in logs["stderr"]
    # A replay through pipes (CI) gives the command the terminal the run had: the same stdout, even
    # from a shell that exports another width.
    replay = project.repro("replay", "latest", "--json", env={"COLUMNS": "57", "LINES": "11"})
    assert replay.code == 0, replay.err
    assert json.loads(replay.out)["status"] == "identical"
    again, replayed = _logs(project)
    assert again["backend"]["details"]["terminal_size"] == "100x30"
    assert replayed["stdout"] == logs["stdout"]


def test_through_pipes_the_commands_stdout_is_repros_stdout(project: Project, tmp_path: Path) -> None:
    project.script("live_progress.py", "train.py")
    project.commit("train")
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "wb") as o, open(err, "wb") as e:  # repro run train.py > out 2> err
        code = subprocess.run(_repro("run", "--backend", "local", "train.py", "--pause", "0.2"),
                              cwd=project.root, env=_env(), stdout=o, stderr=e).returncode  # fmt: skip
    assert code == 0, err.read_text()
    stdout, stderr = out.read_bytes().decode(), err.read_bytes().decode()  # "\r" kept
    assert stdout.startswith("loading data... done\ntty False False ")  # exactly the script's stdout
    assert stdout.endswith("\x1b[32msaved\x1b[0m model.pt\n") and "repro" not in stdout
    assert "\rtrain: 100%" in stderr and "5/5" in stderr  # its stderr: repro's stderr
    own = [line for line in stderr.split("\n") if line and "train:" not in line]
    assert own[0].startswith("repro: run ") and own[1].startswith("run ") and "succeeded" in own[1]
    record, logs = _logs(project)
    assert "terminal" not in record["backend"]["details"]
    assert logs["stdout"].decode() == stdout


def test_json_keeps_stdout_one_document(project: Project) -> None:
    project.script("live_progress.py", "train.py")
    project.commit("train")
    r = project.repro("run", "--backend", "local", "--json", "train.py", "--pause", "0.2")
    assert r.code == 0, r.err
    data = json.loads(r.out)  # nothing but the document
    assert data["format"] == "repro.run/v1" and data["status"] == "succeeded"
    assert Path(data["run_dir"]).is_dir()
    assert "loading data... done\ntty False False" in r.err and "saved" in r.err  # the command's stdout


def test_a_reader_that_leaves_early_costs_the_run_nothing(project: Project) -> None:
    project.write(
        "chatty.py", "for i in range(200_000):\n    print(f'step {i}')\nopen('done.txt', 'w').write('ok')\n"
    )
    project.commit("chatty")
    # repro run chatty.py | head -1
    repro = subprocess.Popen(_repro("run", "--backend", "local", "chatty.py"), cwd=project.root, env=_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert repro.stdout is not None and repro.stderr is not None
    assert repro.stdout.readline() == b"step 0\n"
    repro.stdout.close()  # the reader is gone: the pipe breaks
    err = repro.stderr.read().decode()
    repro.stderr.close()
    assert repro.wait(timeout=300) == 0, err
    assert "Traceback" not in err and "succeeded" in err
    assert (project.root / "done.txt").read_text() == "ok"  # the command ran to its end
    _, logs = _logs(project)
    assert logs["stdout"].count(b"\n") == 200_000  # and every line of it was recorded


@pytest.mark.parametrize("backend", BACKENDS)
def test_q_and_v_work_after_the_subcommand(project: Project, backend: str) -> None:
    project.write("hello.py", "import sys\nprint('hello')\nprint('note', file=sys.stderr)\n")
    project.commit("hello")
    quiet = project.repro("run", "-q", "--backend", backend, "hello.py")
    assert quiet.code == 0, quiet.err
    assert quiet.out == "hello\n"  # -q silences repro, never the command
    lines = quiet.err.splitlines()
    assert lines[0] == "note" and lines[1].startswith("run ") and "succeeded" in lines[1]
    assert not any(line.startswith("repro: ") and "warning" not in line for line in lines)
    record = json.loads(project.repro("show", "latest", "--json").out)
    assert record["command"]["argv"] == ["python", "hello.py"] and record["results"]["status"] == "succeeded"
    loud = project.repro("run", "-v", "--backend", backend, "hello.py")
    assert loud.code == 0 and loud.out == "hello\n" and "repro: run " in loud.err
    both = project.repro("run", "-q", "-v", "--backend", backend, "hello.py")
    assert both.code == 2 and "contradict" in both.err and "Traceback" not in both.err
    listed = project.repro("ls", "-q")
    assert listed.code == 0 and listed.out.count("hello.py") == 2


def test_a_failed_scripts_traceback_shows_once(project: Project) -> None:
    project.write("bad.py", "def step(x):\n    return 1 / x\n\nprint('epoch 1')\nstep(0)\n")
    project.commit("bad")
    r = project.repro("run", "--backend", "local", "bad.py")
    assert r.code == 4 and r.out == "epoch 1\n"
    assert r.err.count("Traceback (most recent call last)") == 1
    assert r.err.count("ZeroDivisionError: division by zero") == 1
    assert (
        r.err.rstrip().splitlines()[-2].startswith("repro: error: the training command exited with status 1")
    )


# --------------------------------------------------------------------------- docker builds


def _typing_extensions_lock(path: Path, nonce: str) -> Path:
    """The committed quick-start lock's typing-extensions entry (its hashes), made unique by a comment."""
    blocks = QUICKSTART_LOCK.read_text().split("\n")
    start = next(i for i, b in enumerate(blocks) if b.startswith("typing-extensions=="))
    entry = [blocks[start]] + [b for b in blocks[start + 1 :][:6] if b.strip().startswith("--hash")]
    path.write_text("\n".join(entry) + f"\n# {nonce}\n")
    return path


def _remove_image(tag: str) -> None:
    from repro.backends.docker.engine import engine, find_image
    from repro.backends.docker.gc import remove_images
    from repro.config import DEFAULT_BASE_IMAGE

    with engine() as client:
        image_id = find_image(client, tag)
    if image_id is not None:  # this test built it
        remove_images([image_id], DEFAULT_BASE_IMAGE)


BUILDER_LINES = ("Step 1/", "--->", "Removing intermediate container", "Successfully built")


@pytest.mark.docker
def test_a_docker_build_shows_stages_and_keeps_the_full_log(project: Project, tmp_path: Path) -> None:
    env = {"REPRO_CACHE_DIR": str(tmp_path / "cache")}  # an empty wheelhouse: the wheel is fetched
    lock = _typing_extensions_lock(tmp_path / "te.lock", f"stages {time.time_ns()}")
    r = project.repro("build", "--lockfile", str(lock), env=env)
    assert r.code == 0, r.err
    tag = r.out.split()[0]
    try:
        assert not any(raw in r.err for raw in BUILDER_LINES), r.err
        stages = [line for line in r.err.splitlines() if line.startswith("repro: ")]
        assert stages[0].startswith("repro: wheels: 1 in the lock (") and ", 1 fetched (" in stages[0]
        assert any(s.startswith("repro: layer 1/1 typing-extensions: 1 wheel, ") for s in stages) or any(
            s.startswith("repro: layer 1/1 rest: 1 wheel, ") for s in stages
        ), stages
        assert all(s.rstrip().endswith("s") for s in stages if " · " in s)  # each with its time
        assert len(r.err.splitlines()) <= 6
        (log,) = (project.root / ".repro" / "logs").glob("*-build.log")
        logged = log.read_text()
        assert "Step 1/" in logged and "Successfully built" in logged and "stage: wheels:" in logged
        # -v (after the subcommand) shows the builder's own lines too; the image is reused now.
        again = project.repro("build", "-v", "--lockfile", str(lock), env=env)
        assert again.code == 0 and "reused" in again.out
    finally:
        _remove_image(tag)


@pytest.mark.docker
def test_a_runs_build_log_is_kept_in_its_run_directory(project: Project, tmp_path: Path) -> None:
    project.write("requirements.in", "typing-extensions\n")
    project.write("hello.py", "print('hello')\n")
    project.commit("hello")
    r = project.repro("run", "--backend", "docker", "hello.py", env={"REPRO_CACHE_DIR": str(tmp_path / "c")})
    assert r.code == 0, r.err
    assert r.out == "hello\n"
    assert "repro: lock: compiling the cpu lock from requirements.in · " in r.err
    assert "Generating hashes" not in r.err and "--hash=" not in r.err and "Step 1/" not in r.err
    record = json.loads(project.repro("show", "latest", "--json").out)
    logged = (project.root / ".repro" / "runs" / record["id"] / "build.log").read_text()
    assert "stage: lock: compiling the cpu lock" in logged and "Generating hashes" in logged
    if record["deps"]["image"]["reused"] is False:
        _remove_image(record["deps"]["image"]["tag"])


@pytest.mark.docker
def test_a_failed_build_prints_its_lines_and_where_the_full_log_is(project: Project, tmp_path: Path) -> None:
    pin = _typing_extensions_lock(tmp_path / "good.lock", "").read_text().splitlines()[0]
    lock = tmp_path / "bad.lock"
    lock.write_text(f"{pin}\n    --hash=sha256:{'0' * 64}\n")  # a hash no file has
    r = project.repro("build", "--lockfile", str(lock), env={"REPRO_CACHE_DIR": str(tmp_path / "cache")})
    assert r.code == 1, r.err
    assert "repro: error: " in r.err and "Traceback" not in r.err
    (log,) = (project.root / ".repro" / "logs").glob("*-build.log")
    assert f"the full log: {log}" in r.err
    assert "stage: wheels:" in log.read_text() and "hash" in log.read_text().lower()
