"""`repro lock`: compile with live progress, refuse bad input, `--check` for CI; import integrity."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.errors import ExitCode
from repro.store.runs import Store
from repro.store.tarwriter import pack
from tests.builders import record, sealed
from tests.conftest import Cli


def test_lock_compiles_with_progress_then_keeps_a_current_lock(
    cli: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "proj"
    root.mkdir()
    (root / "repro.yaml").write_text("backend: local\n")
    (root / "requirements.in").write_text("typing-extensions>=4.0\n")
    stale = cli("lock", "--check", cwd=root)
    assert stale.code == ExitCode.DIFFERS and "stale" in stale.err and "repro lock" in stale.err
    done = cli("lock", cwd=root)
    assert done.code == 0, done.err
    assert done.out.startswith("lockfiles/requirements.lock.txt: 1 package (compiled in")
    # One line for the compile, not pip-compile's hundreds (the lockfile among them): those are in the log.
    (stage,) = done.err.splitlines()
    assert stage.startswith("repro: lock: 1 package resolved and hashed · ") and stage.endswith("s")
    (log,) = (root / ".repro" / "logs").glob("*-lock.log")
    logged = log.read_text()
    assert "Generating hashes" in logged and "stage: lock: pip-compile of the cpu lock" in logged
    text = (root / "lockfiles" / "requirements.lock.txt").read_text()
    assert "typing-extensions==" in text and "--hash=sha256:" in text
    assert "# by the following command:\n#\n#    repro lock\n#\n" in text  # what remakes it, not a temp path
    assert cli("lock", "--check", cwd=root).code == 0
    again = cli("lock", cwd=root)
    assert again.code == 0 and "current, kept" in again.out
    # --upgrade compiles again: still one line; -v (after the subcommand too) shows every raw line.
    upgraded = cli("lock", "--upgrade", cwd=root)
    assert upgraded.code == 0 and len(upgraded.err.splitlines()) == 1 and "--hash" not in upgraded.err
    verbose = cli("lock", "--upgrade", "-v", cwd=root)
    assert verbose.code == 0 and "  build: Generating hashes" in verbose.err
    assert "--hash=sha256:" in verbose.err
    assert len(list((root / ".repro" / "logs").glob("*-lock.log"))) >= 2


def test_lock_refuses_what_it_cannot_do(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "repro.yaml").write_text("backend: local\n")
    nothing = cli("lock", cwd=tmp_path)
    assert (
        nothing.code == ExitCode.USAGE
        and "nothing to lock" in nothing.err
        and "requirements.in" in nothing.err
    )
    (tmp_path / "requirements.in").write_text("six\n")
    names = cli("lock", "six", cwd=tmp_path)
    assert names.code == ExitCode.USAGE and "--upgrade" in names.err
    assert "Traceback" not in nothing.err + names.err


def test_importing_a_capsule_never_swaps_a_stored_run_of_the_same_id(
    cli: Cli,
    tmp_path: Path,
) -> None:
    store = Store(tmp_path)
    rid = "20260101-000000-aaaa"
    sealed(store, rid)
    same = pack(
        record(rid, argv=["python", "train.py"], status="succeeded"), store.blob_path, tmp_path / "same.tar"
    )
    other = pack(
        record(rid, argv=["python", "evil.py"], status="succeeded"), store.blob_path, tmp_path / "other.tar"
    )
    assert store.import_run(store.open_capsule(same)).record.command.argv == ["python", "train.py"]
    r = cli("replay", str(other), cwd=tmp_path)
    assert r.code == ExitCode.USAGE, r.err
    assert "already holds a different run" in r.err and "repro diff" in r.err
    assert store.load_run(rid).record.command.argv == ["python", "train.py"]
