"""ls / show / export / verify against a store built in the test (no training needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.store.record import FileEntry, Record, RunStatus
from repro.store.runs import Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    (tmp_path / "repro.yaml").write_text("backend: local\n")
    s = Store(tmp_path)
    statuses: tuple[RunStatus, ...] = ("succeeded", "failed")
    for i, status in enumerate(statuses):
        rid = f"2026010{i + 1}-000000-aaa{i}"
        record = Record(id=rid, created=f"2026-01-0{i + 1}T00:00:00+00:00")
        record.command.argv = ["python", "train.py", "--lr", "0.1"]
        record.command.params = {"lr": 0.1}
        record.results.status = status
        record.results.exit_code = 0 if status == "succeeded" else 3
        record.results.duration_s = 1.5
        digest = s.put_bytes(b"weights-%d" % i)
        record.results.outputs = [FileEntry("outputs/model.pt", 9, digest, True)]
        s.seal(record, s.begin_run(rid, record.command.argv))
    return s


def test_ls_table_and_json(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    result = cli("ls", cwd=store.root)
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0].split()[:3] == ["ID", "CREATED", "(UTC)"]
    assert "failed" in lines[1] and "succeeded" in lines[2]  # newest first
    answer = json.loads(cli("ls", "--json", cwd=store.root).out)
    assert answer["format"] == "repro.ls/v1"
    assert [r["status"] for r in answer["runs"]] == ["failed", "succeeded"]
    oldest_first = json.loads(cli("ls", "--json", "--reverse", cwd=store.root).out)["runs"]
    assert [r["status"] for r in oldest_first] == ["succeeded", "failed"]
    assert [r["status"] for r in json.loads(cli("ls", "--json", "-n", "1", cwd=store.root).out)["runs"]] == [
        "failed"
    ]


def test_show_summary_and_json(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    text = cli("show", "latest~1", cwd=store.root).out
    assert "20260101-000000-aaa0" in text and "lr=0.1" in text and "outputs/model.pt" in text
    data = json.loads(cli("show", "latest", "--json", cwd=store.root).out)
    assert data["format"] == "repro.capsule/v1" and data["results"]["status"] == "failed"


def test_export_then_verify_ok_and_tampered(cli, store: Store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    tar = tmp_path / "run.tar"
    result = cli("export", "latest", "-o", str(tar), cwd=store.root)
    assert result.code == 0 and tar.is_file()
    ok = cli("verify", str(tar), cwd=store.root)
    assert ok.code == 0 and ok.out.startswith("ok:")
    raw = bytearray(tar.read_bytes())
    raw[raw.index(b"weights-1")] ^= 1
    tar.write_bytes(bytes(raw))
    bad = cli("verify", str(tar), cwd=store.root)
    assert bad.code == 6
    assert bad.out == ""
    assert bad.err.count("\n") <= 2 and "checksum" in bad.err and "Traceback" not in bad.err
    assert cli("show", str(tar), cwd=store.root).code == 6  # every reader checks


def test_verify_a_store_run_detects_a_corrupt_blob(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    record = store.resolve("latest").record
    blob = store.blob_path(record.results.outputs[0].hash)
    blob.write_bytes(b"changed!!")
    result = cli("verify", "latest", cwd=store.root)
    assert result.code == 6 and "corrupt" in result.err


def test_unknown_ref_and_missing_capsule(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    assert cli("show", "nope", cwd=store.root).code == 2
    for command in ("verify", "show", "replay"):  # a path that is not there: a usage error, not "corrupt"
        missing = cli(command, "missing.tar", cwd=store.root)
        assert missing.code == 2 and "no capsule file at missing.tar" in missing.err, command
    (store.root / "sub.tar").mkdir()
    a_dir = cli("verify", "sub.tar", cwd=store.root)
    assert a_dir.code == 2 and "a directory, not a capsule file" in a_dir.err


def test_run_without_a_command_is_a_usage_error(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    result = cli("run", cwd=store.root)
    assert result.code == 2


def test_missing_data_is_a_usage_error_with_a_hint(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    (store.root / "t.py").write_text("print(1)\n")
    result = cli("run", "--data", "nowhere", "t.py", cwd=store.root)
    assert result.code == 2 and "nowhere" in result.err and "hint" in result.err
    assert "incomplete" not in cli("ls", cwd=store.root).out


def test_bad_config_is_exit_2_with_suggestion(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "repro.yaml").write_text("backnd: local\n")
    (tmp_path / "t.py").write_text("print(1)\n")
    result = cli("run", "t.py", cwd=tmp_path)
    assert result.code == 2 and "did you mean 'backend'" in result.err


def test_a_missing_script_is_a_usage_error_before_anything_runs(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    result = cli("run", "--backend", "local", "nosuch.py", cwd=store.root)
    assert result.code == 2 and "nosuch.py" in result.err and "Traceback" not in result.err
    assert len(store.run_ids()) == 2  # the two runs of the fixture, nothing new
