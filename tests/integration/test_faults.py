"""Faults and hostile replays with the local backend: SIGKILL, a full disk, bad input, forged capsules."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders, forging
from tests.conftest import Project
from tests.forging import forge


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[1][0] != "Z"  # a zombie is dead, waiting for its parent


def _wait_for(check: Callable[[], bool], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def _start(project: Project, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "repro", *args], cwd=project.root, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip


def test_sigkill_of_repro_takes_the_command_with_it_and_gc_cleans_up(project: Project) -> None:
    project.script("slow_train.py", "train.py")
    project.commit("train")
    proc = _start(project, "run", "--backend", "local", "--", "python", "train.py")
    pid_file = project.root / "outputs" / "pid.txt"
    assert _wait_for(pid_file.is_file), proc.communicate(timeout=5)
    child = int(pid_file.read_text())
    assert _alive(child)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert _wait_for(lambda: not _alive(child), 10), "the training command outlived repro"

    rows = json.loads(project.repro("ls", "--json", "--reverse").out)["runs"]
    assert [r["status"] for r in rows] == ["incomplete"]
    partial = project.root / ".repro" / "blobs" / "ab" / f".{'ab' * 16}.999999999.tmp"
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_bytes(b"half a blob")
    gc = project.repro("gc")
    assert gc.code == 0, gc.err
    assert "incomplete run" in gc.out and "partial blob" in gc.out
    assert not partial.exists() and json.loads(project.repro("ls", "--json", "--reverse").out)["runs"] == []


@pytest.fixture
def small_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A 20 MiB tmpfs of its own (root only), unmounted afterwards."""
    yield from builders.tmpfs(tmp_path / "small", "20m")


def test_a_full_disk_is_one_line_and_the_store_still_works(small_disk: Path) -> None:
    root = small_disk / "proj"
    root.mkdir()
    project = Project(root)
    project.write(
        "noisy.py",
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--mb', type=int, default=40)\n"
        "a = p.parse_args()\nline = 'x' * ((1 << 20) - 1)\nfor i in range(a.mb):\n    print(line)\n",
    )
    first = project.repro("run", "--backend", "local", "--", "python", "noisy.py", "--mb", "1")
    assert first.code == 0, first.err
    r = project.repro("run", "--backend", "local", "--", "python", "noisy.py")
    assert r.code == 1, r.err
    assert "No space left on device" in r.err and str(root / ".repro") in r.err and "repro gc" in r.err
    assert "Traceback" not in r.err and "Exception in thread" not in r.err

    filler = small_disk / "filler"  # the disk stays full while the store is read and cleaned
    with open(filler, "wb") as f, pytest.raises(OSError):
        while True:
            f.write(b"\0" * (1 << 20))
            f.flush()
    ls = project.repro("ls", "--json")
    assert ls.code == 0, ls.err
    assert [row["status"] for row in json.loads(ls.out)["runs"]][-1] == "succeeded"  # the oldest
    assert project.repro("show", "latest").code == 0
    assert project.repro("verify", "latest").code == 0
    gc = project.repro("gc")
    assert gc.code == 0, gc.err
    assert not list((root / ".repro" / "blobs").glob("*/.*.tmp"))
    assert len(json.loads(project.repro("ls", "--json", "--reverse").out)["runs"]) == 1


BAD_INPUT = [
    (["ls", "-n", "-3"], 2, "-3"),
    (["export", "latest", "-o", "/proc/x.tar"], 1, "/proc"),
    (["run", "--backend", "local", "--outputs", "/", "--", "python", "t.py"], 2, "not inside the project"),
    (["run", "--backend", "local", "--outputs", "../up", "--", "python", "t.py"], 2, "not inside"),
    (["run", "--backend", "local", "--data", "loop", "--", "python", "t.py"], 2, "loop"),
    (["run", "--backend", "local", "--data", "/etc/hostname", "--", "python", "t.py"], 2, "outside"),
    (["diff", "latest", "garbage.tar"], 6, "garbage.tar"),
]


def test_bad_input_is_one_line_with_the_right_exit_code(project: Project) -> None:
    project.write("t.py", "print('ok')\n")
    (project.root / "loop").symlink_to("loop")
    (project.root / "garbage.tar").write_bytes(b"\x1f\x8b" + os.urandom(600))
    project.commit("t")
    assert project.repro("run", "--backend", "local", "t.py").code == 0
    for args, code, words in BAD_INPUT:
        r = project.repro(*args)
        assert r.code == code, (args, r.out + r.err)
        assert "Traceback" not in r.err and "Exception" not in r.err, args
        assert len([line for line in r.err.splitlines() if words in line]) == 1, (args, r.err)
    assert len(json.loads(project.repro("ls", "--json").out)["runs"]) == 1  # no bad run left a directory


# --------------------------------------------------------------------------- hostile replays


PROBE = """\
import argparse, json, os
from pathlib import Path
p = argparse.ArgumentParser()
p.add_argument("--out", default="outputs")
args = p.parse_args()
Path(args.out).mkdir(exist_ok=True)
seen = {k: os.environ.get(k) for k in ("LD_PRELOAD", "PYTHONSTARTUP", "EVIL")}
Path(args.out, "probe.json").write_text(json.dumps({"env": seen}))
print("probe done", seen)
"""


@pytest.fixture
def exported(project: Project, tmp_path: Path) -> Path:
    project.write("probe.py", PROBE)
    project.commit("probe")
    r = project.repro("run", "--backend", "local", "probe.py")
    assert r.code == 0, r.err
    tar = tmp_path / "export" / "probe.tar"
    assert project.repro("export", "latest", "-o", str(tar)).code == 0
    return tar


FORGED_PATHS: list[tuple[str, Any]] = [
    ("results.output_roots", ["{host}"]),
    ("results.output_roots", ["../../../../{name}"]),
    ("command.cwd", "../../../../{name}"),
    ("id", "../../../../{name}"),
    ("data.inputs", [{"path": "/etc/hostname", "digest": "0" * 32}]),
]


def test_a_forged_path_is_refused_before_anything_runs_or_is_created(
    project: Project, exported: Path, tmp_path: Path
) -> None:
    host = tmp_path / "host-dir-that-must-not-appear"
    for i, (field, value) in enumerate(FORGED_PATHS):
        text = json.dumps(value).replace("{host}", str(host)).replace("{name}", host.name)

        def edit(record: dict[str, Any], field: str = field, text: str = text) -> None:
            node = record
            *parents, last = field.split(".")
            for part in parents:
                node = node[part]
            node[last] = json.loads(text)

        bad = forge(exported, tmp_path / f"bad{i}.tar", edit)
        r = project.repro("replay", str(bad))
        assert r.code == 6, (field, r.out + r.err)
        assert field.split(".")[-1] in r.err and "Traceback" not in r.err, r.err
        assert not host.exists() and not (Path("/") / host.name).exists()
    assert len(json.loads(project.repro("ls", "--json").out)["runs"]) == 1  # nothing ran or was imported


def test_network_and_environment_from_a_capsule_are_not_obeyed(
    project: Project, exported: Path, tmp_path: Path
) -> None:
    def edit(record: dict[str, Any]) -> None:
        record["backend"]["network"] = True
        record["determinism"]["env"].update({"LD_PRELOAD": "/tmp/evil.so", "PYTHONSTARTUP": "/tmp/x.py",
                                             "EVIL": "1"})  # fmt: skip

    bad = forge(exported, tmp_path / "asks.tar", edit)
    elsewhere = tmp_path / "elsewhere"  # a store that does not hold the genuine run
    elsewhere.mkdir()
    r = project.repro("replay", str(bad), "--json", "--backend", "local", cwd=elsewhere)
    assert r.code == 0, r.out + r.err
    assert "asked for a network" in r.err and "--network" in r.err
    assert "EVIL, LD_PRELOAD, PYTHONSTARTUP" in r.err
    replay = json.loads(project.repro("show", "latest", "--json", cwd=elsewhere).out)
    assert replay["backend"]["network"] is False
    assert not {"LD_PRELOAD", "PYTHONSTARTUP", "EVIL"} & set(replay["determinism"]["env"])
    assert json.loads(r.out)["status"] == "identical"  # the probe saw none of them, as in the run


def test_a_replaced_blob_is_refused_by_verify_and_replay(
    project: Project, exported: Path, tmp_path: Path
) -> None:
    members = forging.members(exported)
    record = yaml.safe_load(members["capsule.yaml"])
    code_blob = next(f["hash"] for f in record["code"]["files"] if f["path"] == "probe.py")
    members[f"blobs/{code_blob[:2]}/{code_blob}"] = b"open('/tmp/pwned', 'w').write('x')\n"
    members.pop("SHA256SUMS")
    bad = forging.write(tmp_path / "swapped.tar", members)
    for args in (["verify", str(bad)], ["replay", str(bad)]):
        r = project.repro(*args)
        assert r.code == 6 and "content-address name" in r.err, r.err


CTRL_C_WHILE_IMPORTING = """
import sys
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "click":
            raise KeyboardInterrupt
sys.meta_path.insert(0, CtrlC())
sys.argv = ["repro", "ls"]
from repro.__main__ import run
run()
"""


def test_ctrl_c_while_the_cli_is_still_importing_is_one_line(project: Project) -> None:
    argv = [sys.executable, "-c", CTRL_C_WHILE_IMPORTING]
    done = subprocess.run(argv, cwd=project.root, capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "repro: error: interrupted\n"
