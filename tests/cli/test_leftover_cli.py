"""`repro gc` and `repro resume` on the copy of the project a killed docker run left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.backends import scratch
from repro.store.runs import Store

KILLED = "20260106-000000-aaa6"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A project whose docker run was killed with its repro after saving a checkpoint in its copy."""
    (tmp_path / "repro.yaml").write_text("backend: local\n")
    (tmp_path / "train.py").write_text("print('train')\n")
    s = Store(tmp_path)
    work = s.begin_run(KILLED, ["python", "train.py"]) / "work"
    (work.parent / "running.json").unlink()  # its repro process is gone
    tree = work / scratch.TREE
    scratch.make(tmp_path, tree, [])
    (tree / "checkpoints").mkdir()
    (tree / "checkpoints" / "last.pt").write_bytes(b"epoch 0")
    return s


def test_gc_brings_back_the_checkpoint_before_removing_the_run(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    dry = cli("gc", "--dry-run", cwd=store.root)
    assert dry.code == 0, dry.err
    said = f"would bring back 1 file run {KILLED} wrote in its container's copy: checkpoints/last.pt"
    assert said in dry.out
    assert not (store.root / "checkpoints").exists() and (store.runs_dir / KILLED).is_dir()

    r = cli("gc", cwd=store.root)
    assert r.code == 0, r.err
    assert f"brought back 1 file run {KILLED}" in r.out and f"removed incomplete run {KILLED}" in r.out
    assert (store.root / "checkpoints" / "last.pt").read_bytes() == b"epoch 0"
    assert not (store.runs_dir / KILLED).exists()


def test_an_unreadable_copy_is_kept_by_gc_and_refused_by_resume_in_one_line(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    (store.runs_dir / KILLED / "work" / "tree.json").write_text("{truncated")
    r = cli("gc", cwd=store.root)
    assert r.code == 0, r.err
    assert f"kept incomplete run {KILLED}: the run's copy of the project cannot be matched" in r.out
    assert (store.runs_dir / KILLED / "work" / "tree" / "checkpoints" / "last.pt").is_file()

    r = cli("resume", KILLED, cwd=store.root)
    assert r.code == 6 and r.out == ""
    assert r.err.startswith("repro: error: the run's copy of the project cannot be matched")
    assert "hint:" in r.err and "Traceback" not in r.err
