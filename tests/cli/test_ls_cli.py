"""`repro ls`: newest first, commands quoted so they paste back, cut to a terminal's width only.

The terminal cases run `repro ls` with its stdout on a real pseudo-terminal.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import shlex
import sqlite3
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from repro.store.record import Record
from repro.store.runs import Store

LONG = ["python", "train.py", "--config", "configs/experiments/resnet50_imagenet_long_schedule.yaml",
        "--lr", "0.1", "--note", "it's a long run"]  # fmt: skip
QUOTED = ["python", "-c", "print(1)"]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    (tmp_path / "repro.yaml").write_text("backend: local\n")
    s = Store(tmp_path)
    for i, argv in enumerate((QUOTED, LONG)):
        rid = f"2026010{i + 1}-000000-aaa{i}"
        record = Record(id=rid, created=f"2026-01-0{i + 1}T00:00:00+00:00")
        record.command.argv = argv
        record.results.status = "succeeded"
        record.results.exit_code = 0
        record.results.duration_s = 2.0
        s.seal(record, s.begin_run(rid, argv))
    return s


def _ls(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """`repro ls` with stdout a pipe."""
    environ = {**os.environ, "NO_COLOR": "1", **(env or {})}
    cmd = [sys.executable, "-m", "repro", "ls", *args]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=environ, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _ls_on_a_terminal(root: Path, columns: int, env: dict[str, str]) -> str:
    """`repro ls` with stdout a pseudo-terminal ``columns`` wide."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([sys.executable, "-m", "repro", "ls"], cwd=root, stdout=slave,
                            stderr=subprocess.PIPE, env={**environ, "NO_COLOR": "1", **env})  # fmt: skip
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the other side is closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_newest_first_and_reversed(store: Store) -> None:
    lines = _ls(store.root).splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["20260102-000000-aaa1", "20260101-000000-aaa0"]
    lines = _ls(store.root, "--reverse").splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["20260101-000000-aaa0", "20260102-000000-aaa1"]
    lines = _ls(store.root, "-n", "1", "--reverse").splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["20260102-000000-aaa1"]


def test_piped_commands_are_whole_and_paste_back(store: Store) -> None:
    out = _ls(store.root, env={"COLUMNS": "40"})  # COLUMNS alone does not cut a pipe
    assert "python -c 'print(1)'" in out
    assert shlex.join(LONG) in out and "…" not in out and "..." not in out
    runs = json.loads(_ls(store.root, "--json"))["runs"]
    assert [shlex.split(r["command"]) for r in runs] == [LONG, QUOTED]


@pytest.mark.parametrize("how", ["COLUMNS", "window"])
def test_on_a_terminal_the_command_is_cut_to_its_width(store: Store, how: str) -> None:
    env = {"COLUMNS": "100"} if how == "COLUMNS" else {}  # COLUMNS wins over the window's size
    out = _ls_on_a_terminal(store.root, 100 if how == "window" else 200, env)
    lines = out.splitlines()
    assert len(lines) == 3 and all(len(line) <= 100 for line in lines), lines
    long_line = next(line for line in lines if "train.py" in line)
    assert long_line.endswith("…") and len(long_line) == 100 and "..." not in out
    assert lines[-1].endswith("python -c 'print(1)'")  # short enough: whole
    wide = _ls_on_a_terminal(store.root, 300, {})
    assert shlex.join(LONG) in wide and "…" not in wide


def test_an_older_index_is_read_again_with_quoted_commands(store: Store) -> None:
    _ls(store.root)  # the index now holds the runs
    db = sqlite3.connect(store.dir / "index.sqlite")
    with db:  # as an index written before commands were quoted
        db.execute("UPDATE runs SET command = 'python -c print(1)' WHERE id = '20260101-000000-aaa0'")
        db.execute("PRAGMA user_version = 1")
    db.close()
    assert "python -c 'print(1)'" in _ls(store.root)
    db = sqlite3.connect(store.dir / "index.sqlite")
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2
        assert db.execute("SELECT command FROM runs WHERE id = '20260101-000000-aaa0'").fetchone() == (
            "python -c 'print(1)'",
        )
    finally:
        db.close()


def test_a_status_outside_the_rows_set_reads_as_invalid() -> None:
    """The index is a cache anyone can write: a status it holds outside the set is shown as invalid."""
    from repro.store.index import ROW_STATUSES, row_from_db

    row = ("20260101-000000-aaa0", "", "succeeded", "run", "python t.py", 1.0, "local", None, None)
    assert row_from_db(row).status == "succeeded"
    assert row_from_db((*row[:2], "\x1b[2Jexploded", *row[3:])).status == "invalid"
    assert set(ROW_STATUSES) >= {"succeeded", "failed", "interrupted", "running", "incomplete", "pending"}
