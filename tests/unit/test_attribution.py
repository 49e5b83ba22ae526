"""The output rule, the container's scratch copy, the runtime's process reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from repro.backends import scratch
from repro.backends.base import merge_pythonpath, runtime_source
from repro.collect import attribution as outputs
from repro.collect.reports import read_reports
from repro.store.record import FileEntry, Record
from repro.store.runs import Store


def _write(root: Path, rel: str, text: str = "x") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_outputs_are_what_the_run_wrote_minus_data_caches_excludes_and_other_runs(tmp_path: Path) -> None:
    for rel in (
        "model.pt",
        "data/train.csv",
        "__pycache__/m.cpython-311.pyc",
        "runs/a.tmp",
        "outputs/old.txt",
    ):
        _write(tmp_path, rel)
    before = outputs.snapshot(tmp_path, ["outputs"])
    _write(tmp_path, "outputs/mine.txt")
    _write(tmp_path, "outputs/theirs.txt")
    written = {"model.pt", "data/train.csv", "__pycache__/m.cpython-311.pyc", "runs/a.tmp", "gone.txt"}
    found = outputs.select(
        tmp_path, written=written, declared=["outputs"], before=before, data=["data"],
        exclude=["*.tmp"], claimed={"outputs/theirs.txt"},
    )  # fmt: skip
    assert found == ["model.pt", "outputs/mine.txt"]


def test_exclude_globs_match_a_file_or_any_of_its_directories() -> None:
    assert outputs.excluded("runs/exp/events.out", ["runs"])
    assert outputs.excluded("a/b/c.log", ["*.log"])
    assert outputs.excluded("wandb/run-1/files/x", ["wandb/*"])
    assert not outputs.excluded("model.pt", ["*.log", "runs"])


def test_other_runs_claim_what_they_wrote_running_or_sealed_since(tmp_path: Path) -> None:
    store = Store(tmp_path)
    running = store.begin_run("20260101-000000-aaaa", ["python"])
    (running / "work" / "runtime").mkdir()
    report = {"e": "w", "p": "outputs/a.txt"}
    (running / "work" / "runtime" / "proc.11.jsonl").write_text(json.dumps(report) + "\n")
    sealed_dir = store.begin_run("20260101-000001-bbbb", ["python"])
    record = Record(id="20260101-000001-bbbb", created="now")
    record.results.outputs = [FileEntry("outputs/b.txt", 1, "0" * 32)]
    store.seal(record, sealed_dir)
    claimed = outputs.claimed_elsewhere(store.runs_dir, "20260101-000002-cccc", since_ns=0)
    assert claimed == {"outputs/a.txt", "outputs/b.txt"}
    later = outputs.claimed_elsewhere(
        store.runs_dir, "x", since_ns=(sealed_dir / "capsule.yaml").stat().st_mtime_ns + 1
    )
    assert later == {"outputs/a.txt"}


def test_a_command_the_runtime_cannot_watch_is_judged_by_what_changed_in_the_tree(tmp_path: Path) -> None:
    _write(tmp_path, "train.sh")
    _write(tmp_path, "data/x.csv")
    before = outputs.snapshot_tree(tmp_path, ["data"])
    _write(tmp_path, "result.txt")
    _write(tmp_path, "data/y.csv")
    _write(tmp_path, ".repro/runs/x")
    assert outputs.changed_since(tmp_path, before, ["data"]) == {"result.txt"}


def test_the_scratch_copy_brings_back_only_what_changed(tmp_path: Path) -> None:
    root, copy = tmp_path / "proj", tmp_path / "copy"
    _write(root, "train.py", "code")
    _write(root, "ckpt/old.pt", "old")
    _write(root, "data/x.csv")
    _write(root, ".git/HEAD")
    _write(root, ".venv/pyvenv.cfg")
    copied = scratch.make(root, copy, ["data", "outputs"])
    assert sorted(copied) == ["ckpt/old.pt", "train.py"]
    _write(copy, "model.pt", "weights")
    _write(copy, "ckpt/old.pt", "new bytes")
    os.utime(copy / "ckpt" / "old.pt", ns=(1, 1))
    changed = scratch.changed(copy, copied, ["data", "outputs"])
    assert changed == ["ckpt/old.pt", "model.pt"]
    scratch.bring_back(copy, root, changed)
    assert (root / "model.pt").read_text() == "weights" and (root / "ckpt/old.pt").read_text() == "new bytes"
    assert (root / "train.py").read_text() == "code"


def test_env_in_the_command_keeps_the_runtime_on_pythonpath() -> None:
    assert merge_pythonpath(["env", "PYTHONPATH=.", "A=1", "python", "t.py", "PYTHONPATH=x"], "/rt") == [
        "env", "PYTHONPATH=/rt:.", "A=1", "python", "t.py", "PYTHONPATH=x",
    ]  # fmt: skip
    assert merge_pythonpath(["python", "t.py"], "/rt") == ["python", "t.py"]
    assert merge_pythonpath(["/usr/bin/env", "PYTHONPATH="], "/rt") == ["/usr/bin/env", "PYTHONPATH=/rt"]


CHILD = """\
import os, random
from pathlib import Path

random.seed(7)
Path("out").mkdir(exist_ok=True)
with open("out/tmp", "w") as f:
    f.write("a")
os.replace("out/tmp", "out/final.txt")
Path("out/final.txt").read_text()
Path("input.txt").read_text()
with open(os.path.join({outside!r}, "elsewhere.txt"), "w") as f:
    f.write("b")
if os.fork() == 0:
    Path("from_child.txt").write_text("c")
    os._exit(0)
os.wait()
"""


def test_every_process_reports_in_with_its_reads_writes_and_seeds(tmp_path: Path) -> None:
    root, runtime, outside = tmp_path / "proj", tmp_path / "rt", tmp_path / "elsewhere"
    for d in (root, runtime, outside, tmp_path / "tmp"):
        d.mkdir()
    _write(root, "input.txt", "in")
    _write(root, "job.py", CHILD.format(outside=str(outside)))
    inject, lib = runtime_source()
    env = {
        **os.environ, "REPRO_RUN_ID": "t", "REPRO_RUNTIME_DIR": str(runtime), "REPRO_PROJECT_ROOT": str(root),
        "PYTHONPATH": f"{inject}{os.pathsep}{lib}", "TMPDIR": str(tmp_path / "tmp"),
    }  # fmt: skip
    env.pop("REPRO_BOOT_PID", None)
    subprocess.run([sys.executable, "job.py"], cwd=root, env=env, check=True, timeout=60)
    reports = read_reports(runtime)
    assert reports.main_booted and reports.processes == 2  # the forked child reported in too
    assert {"out/tmp", "out/final.txt", "from_child.txt"} <= reports.written
    assert "input.txt" in reports.read and "out/final.txt" in reports.read
    assert reports.written_outside == {str(outside / "elsewhere.txt")}
    assert reports.script_seeds == [{"api": "random.seed", "value": 7, "where": "job.py:4"}]


def test_a_file_written_again_by_a_requeued_jobs_next_start_is_not_written_at_once(tmp_path: Path) -> None:
    """Rank 0 of the first start saves the checkpoint, rank 0 of the restarted job saves it again: in
    order, not at once. Two processes of one start writing one file are still named."""
    from repro.runtime import contract

    def report(pid: int, rank: int, attempt: int | None, *paths: str) -> None:
        boot = {contract.ROW_KIND: "boot", "pid": pid, "rank": rank, "main": False}
        if attempt is not None:
            boot["attempt"] = attempt
        rows = [boot, *({contract.ROW_KIND: "w", "p": p} for p in paths)]
        (tmp_path / f"proc.{pid}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    report(101, 0, None, "ckpt/last.pt", "log.txt")  # a first start records no attempt
    report(202, 0, 1, "ckpt/last.pt")
    report(203, 1, 1, "log.txt")
    report(204, 1, 1, "log.txt")
    shared = read_reports(tmp_path).shared()
    assert list(shared) == ["log.txt"]
    assert [(w.pid, w.rank, w.attempt) for w in shared["log.txt"]] == [(203, 1, 1), (204, 1, 1)]
