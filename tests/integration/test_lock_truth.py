"""The lock describes what ran: a range requirement locks the installed version (compiled while the
run goes on), and a lock that pins other versions is named package by package in the record and in
one line at the end of the run."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest

from tests.builders import training_project
from tests.conftest import QUICKSTART_LOCK, Project

pytestmark = pytest.mark.slow

ARGV = ["--", "python", "train.py", "--epochs", "2", "--workers", "0", "--save", "outputs/model.pt",
        "--checkpoint-dir", "outputs/checkpoints"]  # fmt: skip


def test_a_range_requirement_locks_what_the_local_run_used(project: Project, tmp_path: Path) -> None:
    training_project(project, "train_ckpt.py", message=None).write(
        "requirements.txt", "typing-extensions>=4.0\n"
    )
    project.commit("train")
    installed = metadata.version("typing-extensions")
    # --json: the command's stdout joins repro's notices on stderr, in the order they came.
    r = project.repro("run", "--backend", "local", "--json", "--data", "data", *ARGV,
                      env={"REPRO_CACHE_DIR": str(tmp_path / "cache")})  # fmt: skip
    assert r.code == 0, r.err
    assert "in the background" in r.err  # the run did not wait for pip-compile to start
    assert r.err.index("in the background") < r.err.index("epoch 1/2")
    record = json.loads(project.repro("show", "latest", "--json").out)
    deps = record["deps"]
    assert deps["variant"] == "local" and deps["lockfile"] == ".repro/locks/requirements-local.lock.txt"
    assert f"typing-extensions=={installed}" in deps["requirements"]
    assert f"typing-extensions=={installed}" in deps["freeze"]
    assert deps["mismatches"] == []
    assert not any(w["code"] == "lock_mismatch" for w in record["warnings"])
    assert project.repro("lock", "--check", "--variant", "local").code == 0  # the compiled lock is current


def _entry(name: str) -> str:
    """One package's entry (pin and hashes) of the committed torch lock."""
    lines = QUICKSTART_LOCK.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name}=="))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("    --hash"))
    return "\n".join(lines[start:end]) + "\n"


def test_a_lock_that_pins_other_versions_is_named_package_by_package(project: Project) -> None:
    old = "typing-extensions==4.0.0 \\\n    --hash=sha256:" + "0" * 64 + "\n"
    pinned = _entry("torch") + old
    training_project(project, "train_ckpt.py", message=None).write(
        "requirements.txt", pinned
    )  # hash-pinned: the lock as it is
    project.commit("train")
    r = project.repro("run", "--backend", "local", *ARGV)
    assert r.code == 0, r.err
    installed = metadata.version("typing-extensions")
    warning = [line for line in r.err.splitlines() if "lock does not describe what ran" in line]
    assert len(warning) == 1 and f"typing-extensions: locked 4.0.0, ran {installed}" in warning[0]
    deps = json.loads(project.repro("show", "latest", "--json").out)["deps"]
    assert f"typing-extensions: locked 4.0.0, ran {installed}" in deps["mismatches"]
    assert len(deps["mismatches"]) == 1  # torch ran as locked: not reported
