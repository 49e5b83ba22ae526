"""`repro run` against real git repos and real torch training, in separate processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import xxhash

from repro.facts.cpus import usable_cpus
from tests.conftest import Project, git

TRAIN = ["--", "python", "train.py", "--epochs", "1"]


def _model_bytes(p: Project) -> bytes:
    return (p.root / "outputs" / "model.pt").read_bytes()


def test_same_seed_gives_identical_bytes_other_seed_does_not(project: Project) -> None:
    project.script("train_unseeded.py", "train.py")
    project.points()
    project.commit("train")
    runs = {}
    for label, seed in (("a", "7"), ("b", "7"), ("c", "8")):
        r = project.repro("run", "--backend", "local", "--seed", seed, "--data", "data", *TRAIN)
        assert r.code == 0, r.err
        runs[label] = _model_bytes(project)
    assert runs["a"] == runs["b"]
    assert runs["a"] != runs["c"]


def test_record_holds_commit_patch_data_hashes_lock_seed_params(project: Project) -> None:
    project.script("train_unseeded.py", "train.py")
    project.points()
    project.lock_torch()
    head = project.commit("train")
    script = project.root / "train.py"
    script.write_text(
        script.read_text().replace("nn.Linear(2, 16)", "nn.Linear(2, 12)").replace("(16, 2)", "(12, 2)")
    )
    project.write("notes.md", "untracked notes\n")
    r = project.repro("run", "--backend", "local", "--seed", "42", "--data", "data", "--", "train.py",
                      "--lr", "0.02", "--batch-size=8", "--epochs", "1", "--workers", "0")  # fmt: skip
    assert r.code == 0, r.err
    shown = project.repro("show", "latest", "--json")
    record = json.loads(shown.out)
    code = record["code"]
    assert code["commit"] == head and code["branch"] == "main" and code["dirty"] is True
    blobs = project.root / ".repro" / "blobs"
    patch = (blobs / code["patch"][:2] / code["patch"]).read_text()
    assert "nn.Linear(2, 12)" in patch
    assert code["untracked"] == [] and [u["path"] for u in code["listed"]] == ["notes.md"]  # not code
    data_file = project.root / "data" / "points.csv"
    (entry,) = record["data"]["inputs"][0]["files"]
    assert entry == {"path": "data/points.csv", "size": data_file.stat().st_size,
                     "hash": xxhash.xxh3_128_hexdigest(data_file.read_bytes()), "stored": False}  # fmt: skip
    lock = record["deps"]
    lock_text = (blobs / lock["lock_blob"][:2] / lock["lock_blob"]).read_text()
    assert "--hash=sha256:" in lock_text and "torch==2.13.0" in lock_text
    assert record["seeds"]["master"] == 42 and record["seeds"]["drawn"] is False
    assert record["command"]["params"] == {"lr": 0.02, "batch_size": 8, "epochs": 1, "workers": 0}
    assert record["command"]["argv"][:2] == ["python", "train.py"]
    assert any(p.startswith("torch==2.13.0") for p in record["deps"]["freeze"])
    assert record["determinism"]["mode"] == "strict" and record["determinism"]["threads"] == usable_cpus()
    assert record["determinism"]["knobs"]["deterministic_algorithms"] is True
    assert record["results"]["final_metrics"]["loss"] > 0
    assert {o["path"] for o in record["results"]["outputs"]} == {"outputs/model.pt", "outputs/summary.txt"}


def test_planted_secrets_appear_nowhere_in_the_capsule(project: Project, tmp_path: Path) -> None:
    project.write("train.py", "import os, sys\nprint('args', len(sys.argv))\n")
    git(project.root, "remote", "add", "origin", "https://alice:remote-pass-9f3@git.example.com/org/repo.git")
    project.commit("script")
    project.write(".env", "DB_PASSWORD=dotenv-pass-4c1\n")
    project.write("deploy/id_rsa", "-----BEGIN OPENSSH PRIVATE KEY----- key-bytes-77a\n")
    env = {"MY_SERVICE_TOKEN": "env-token-2b8", "AWS_SECRET_ACCESS_KEY": "aws-key-6d0",
           "HTTPS_PROXY": "http://bob:proxy-pass-1e5@proxy:3128", "OMP_NUM_THREADS": "1"}  # fmt: skip
    r = project.repro("run", "--backend", "local", "--", "python", "train.py", "--api-key", "argv-key-8a2",
                      "--token=argv-token-3c9", env=env)  # fmt: skip
    assert r.code == 0, r.err
    tar = tmp_path / "run.tar"
    assert project.repro("export", "latest", "-o", str(tar)).code == 0
    blob = tar.read_bytes()
    with tarfile.open(tar) as t:
        for m in t.getmembers():
            blob += t.extractfile(m).read()  # type: ignore[union-attr]
    for secret in ("remote-pass-9f3", "dotenv-pass-4c1", "key-bytes-77a", "env-token-2b8", "aws-key-6d0",
                   "proxy-pass-1e5", "argv-key-8a2", "argv-token-3c9"):  # fmt: skip
        assert secret.encode() not in blob, secret
    record = json.loads(project.repro("show", str(tar), "--json").out)
    assert record["code"]["remote"] == "https://git.example.com/org/repo.git"
    assert set(record["code"]["excluded"]) == {".env", "deploy/id_rsa"}
    assert "env:MY_SERVICE_TOKEN" not in record["redactions"]  # not on the allow-list: never read at all
    assert any(h.startswith("argv:") for h in record["redactions"])


def test_failing_command_is_recorded_and_exits_4(project: Project) -> None:
    project.script("crash.py")
    r = project.repro("run", "--backend", "local", "--", "python", "crash.py")
    assert r.code == 4
    assert r.out == "starting\n"  # the command's stdout is repro's stdout
    assert r.err.count("boom: the loss went to NaN") == 1  # shown as it came, not again with the error
    assert r.err.index("about to fail") < r.err.index("boom") < r.err.index("repro: error:")
    assert "Traceback" not in r.err
    record = json.loads(project.repro("show", "latest", "--json").out)
    assert record["results"]["status"] == "failed" and record["results"]["exit_code"] == 1
    assert record["results"]["stderr_tail"][-1] == "boom: the loss went to NaN"
    assert "failed" in project.repro("ls").out


def test_json_output_of_run(project: Project) -> None:
    project.write("hello.py", "print('hello')\n")
    r = project.repro("run", "--backend", "local", "--json", "hello.py")
    data = json.loads(r.out)
    assert r.code == 0 and data["status"] == "succeeded"
    assert Path(data["run_dir"]).is_dir() and data["id"] and data["format"] == "repro.run/v1"


def _start_slow(project: Project) -> subprocess.Popen[str]:
    project.write("slow.py", "import time\nprint('started', flush=True)\ntime.sleep(120)\n")
    argv = [sys.executable, "-m", "repro", "run", "--backend", "local", "slow.py"]
    proc = subprocess.Popen(argv, cwd=project.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    runs = project.root / ".repro" / "runs"
    while time.time() < deadline:
        logs = [d / "work" / "stdout.log" for d in runs.iterdir()] if runs.is_dir() else []
        if any(log.is_file() and log.read_text() for log in logs):
            return proc
        time.sleep(0.2)
    proc.kill()
    proc.communicate()
    raise AssertionError("the run did not start")


def test_killed_run_never_looks_complete(project: Project) -> None:
    proc = _start_slow(project)
    proc.kill()
    proc.communicate()
    time.sleep(0.5)
    rows = json.loads(project.repro("ls", "--json", "--reverse").out)["runs"]
    assert [r["status"] for r in rows] == ["incomplete"]
    assert project.repro("show", "latest").code == 2


def test_ctrl_c_records_the_run_as_interrupted(project: Project) -> None:
    proc = _start_slow(project)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert out == "started\n"  # the command's stdout; its stderr (Python's KeyboardInterrupt) is its own
    own = [line for line in err.splitlines() if line.startswith("repro:")]
    assert not any("Traceback" in line for line in own) and "interrupted" in own[-1]
    assert err.splitlines()[-1] == own[-1]
    rows = json.loads(project.repro("ls", "--json", "--reverse").out)["runs"]
    assert [r["status"] for r in rows] == ["interrupted"]
    leftover = subprocess.run(["pgrep", "-f", str(project.root / "slow.py")], capture_output=True)
    assert leftover.returncode != 0 or not leftover.stdout.strip() or os.name != "posix"


def test_files_read_but_not_declared_are_warned_about(project: Project) -> None:
    project.write(".gitignore", "extra/\n")
    project.write("conf/config.yaml", "lr: 0.1\n")  # tracked: code, restored by a replay
    project.write("read.py", "open('data/train.csv').read()\nopen('extra/lookup.csv').read()\n"
                  "open('conf/config.yaml').read()\n")  # fmt: skip
    project.commit("read")
    project.write("data/train.csv", "1\n")
    project.write("extra/lookup.csv", "2\n")  # ignored by git: not in the code snapshot, not declared
    r = project.repro("run", "--backend", "local", "--data", "data", "read.py")
    assert r.code == 0, r.err
    assert "extra/lookup.csv" in r.err and "--data" in r.err
    record = json.loads(project.repro("show", "latest", "--json").out)
    assert record["data"]["undeclared"] == ["extra/lookup.csv"]
    read = [i for i in record["data"]["inputs"] if i["read"]]  # an ignored file it read: an input
    assert [i["path"] for i in read] == ["extra/lookup.csv"]


def test_outside_git_the_code_is_a_snapshot(tmp_path: Path) -> None:
    p = Project(tmp_path / "plain")
    p.root.mkdir()
    p.write("train.py", "import repro\nrepro.log_params(width=3)\nprint(repro.seed())\n")
    p.write(".reproignore", "scratch/\n")
    p.write("scratch/junk.bin", "x")
    r = p.repro("run", "--backend", "local", "--seed", "5", "train.py")
    assert r.code == 0, r.err
    record = json.loads(p.repro("show", "--json").out)
    assert record["code"]["kind"] == "snapshot"
    assert [f["path"] for f in record["code"]["files"]] == [".reproignore", "train.py"]
    assert record["results"]["params"] == {"width": 3}
    digest = record["results"]["logs"]["stdout"]
    assert (p.root / ".repro" / "blobs" / digest[:2] / digest).read_text() == "5\n"
