"""The exit-code table (README, `repro --help`, `repro/errors.py` agree; real invocations return
what it says) and shell completion of run refs."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.shell_completion import ShellComplete

from repro.cli import cli as group
from repro.errors import EXIT_CODES, ExitCode
from repro.store.record import Record
from repro.store.runs import Store
from tests.conftest import Cli

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
IDS = ["20260101-000000-aaa0", "20260102-000000-aaa1", "20260103-000000-aaa2"]


def _readme_table() -> list[tuple[int, str]]:
    section = README[README.index("## Exit codes") :]
    section = section[: section.index("\n## ", 3)]
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", section, flags=re.M)
    return [(int(code), meaning.replace("\\|", "|")) for code, meaning in rows]


def test_the_readme_table_is_the_one_in_errors_py() -> None:
    assert _readme_table() == [(int(code), meaning) for code, meaning in EXIT_CODES]
    assert sorted({int(c) for c in ExitCode}) == sorted(int(c) for c, _ in EXIT_CODES)


def test_repro_help_ends_with_the_table(cli: Cli) -> None:
    out = " ".join(cli("--help").out.split())  # the epilog wraps long meanings
    for code, meaning in EXIT_CODES:
        assert f"{int(code)} {meaning}" in out, code


@pytest.fixture
def store(tmp_path: Path) -> Store:
    (tmp_path / "repro.yaml").write_text("backend: local\n")
    s = Store(tmp_path)
    for i, rid in enumerate(IDS):
        record = Record(id=rid, created=f"2026-01-0{i + 1}T00:00:00+00:00")
        record.command.argv = ["python", "train.py"]
        record.results.status = "succeeded"
        record.results.outputs = []
        record.results.final_metrics = {"loss": 0.5 + i}
        s.seal(record, s.begin_run(rid, record.command.argv))
    return s


def test_real_invocations_return_the_documented_codes(cli: Cli, store: Store) -> None:
    root = store.root
    assert cli("verify", "nothere.tar", cwd=root).code == int(ExitCode.USAGE) == 2  # missing, not corrupt
    assert cli("show", "nope", cwd=root).code == 2
    assert cli("frobnicate", cwd=root).code == 2
    assert cli("diff", IDS[0], IDS[1], cwd=root).code == 0  # as `git diff`: differences are not failures
    assert cli("diff", IDS[0], IDS[1], "--exit-code", cwd=root).code == int(ExitCode.DIFFERS) == 1
    assert cli("diff", IDS[0], IDS[0], "--exit-code", cwd=root).code == 0
    (root / "requirements.in").write_text("torch==2.13.0\n")
    stale = cli("lock", "--check", cwd=root)
    assert stale.code == int(ExitCode.DIFFERS) == 1 and "stale" in stale.err
    (root / "repro.yaml").write_text("backend: [local\n")
    assert cli("lock", "--check", cwd=root).code == 2  # a bad repro.yaml stays a usage error
    tar = root / "run.tar"
    assert cli("export", IDS[0], "-o", str(tar), cwd=root).code == 0
    tar.write_bytes(tar.read_bytes()[:2048])
    assert cli("verify", str(tar), cwd=root).code == int(ExitCode.CAPSULE_INVALID) == 6


def test_a_store_database_that_fails_is_one_line_naming_it(
    cli: Cli, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unusable(*args: object, **kwargs: object) -> object:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Store, "rows", unusable)
    r = cli("ls", cwd=store.root)
    assert r.code == int(ExitCode.UNEXPECTED)
    assert "the store's database could not be used: database or disk is full" in r.err
    assert "Traceback" not in r.err and "repro gc" in r.err


def test_a_bad_repro_yaml_names_its_path_and_line(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "repro.yaml").write_text("backend: local\nmode: [strict\nseed: 3\n")
    r = cli("run", "--", "python", "-c", "pass", cwd=tmp_path)
    assert r.code == 2 and "<unicode string>" not in r.err
    assert f"{tmp_path / 'repro.yaml'} is not valid YAML: line 3, column 5:" in r.err
    assert len(r.err.strip().splitlines()) == 1


def _complete(args: list[str], incomplete: str) -> list[str]:
    shell = ShellComplete(group, {}, "repro", "_REPRO_COMPLETE")
    return [item.value for item in shell.get_completions(args, incomplete)]


def test_refs_complete_ids_latest_and_capsule_files(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(store.root)
    (store.root / "golden.tar").write_bytes(b"")
    (store.root / "capsules").mkdir()
    (store.root / "capsules" / "old.tar").write_bytes(b"")
    (store.root / "notes.txt").write_text("")
    assert _complete(["show"], "") == ["latest", *reversed(IDS), "golden.tar"]
    assert _complete(["replay"], "2026010") == list(reversed(IDS))
    assert _complete(["diff", IDS[0]], "20260101") == [IDS[0]]
    assert _complete(["export"], "latest~") == ["latest~1", "latest~2"]
    assert _complete(["verify"], "capsules/") == ["capsules/old.tar"]
    assert _complete(["check", "--against"], "gol") == ["golden.tar"]
    assert _complete(["resume"], "x") == []


def test_completion_honours_dash_c_and_never_fails(
    tmp_path_factory: pytest.TempPathFactory, store: Store
) -> None:
    assert _complete(["-C", str(store.root), "show"], "20260103") == [IDS[2]]
    elsewhere = tmp_path_factory.mktemp("no-project")
    assert _complete(["-C", str(elsewhere), "show"], "") == []  # no store: no ids, no error


def test_bash_completion_through_the_real_command(store: Store) -> None:
    words = {"_REPRO_COMPLETE": "bash_complete", "COMP_WORDS": "repro show 2026010", "COMP_CWORD": "2"}
    proc = subprocess.run([sys.executable, "-m", "repro"], cwd=store.root, env={**os.environ, **words},
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"plain,{rid}" for rid in reversed(IDS)]
    source = subprocess.run([sys.executable, "-m", "repro"], cwd=store.root, capture_output=True, text=True,
                            env={**os.environ, "_REPRO_COMPLETE": "bash_source"}, timeout=60)  # fmt: skip
    assert "complete -o nosort -F _repro_completion repro" in source.stdout
