"""`repro resume` refusals, and the chain in `ls`/`show`, against a store built in the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.store.record import CheckpointInfo, Record
from repro.store.runs import Store
from tests.builders import sealed

DONE, KILLED, RESUMED, REPLAY = (f"2026010{i}-000000-aaa{i}" for i in range(1, 5))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    (tmp_path / "repro.yaml").write_text("backend: local\n")
    s = Store(tmp_path)
    sealed(s, DONE, "succeeded")
    sealed(s, KILLED, "failed")
    resumed = Record(id=RESUMED, created="2026-01-03T00:00:00+00:00", resumed_from=KILLED)
    resumed.command.argv = ["python", "train.py"]
    resumed.results.status = "succeeded"
    states = {"0": s.put_bytes(b'{"states": {}}'), "1": s.put_bytes(b'{"states": {"python": 1}}')}
    resumed.results.checkpoints = [CheckpointInfo("checkpoints/last.pt", "ab" * 32, 16, states)]
    s.seal(resumed, s.begin_run(RESUMED, resumed.command.argv))
    sealed(s, REPLAY, "succeeded", kind="replay", parent=DONE)
    return s


def test_ls_and_show_show_the_chain(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    table = cli("ls", cwd=store.root).out
    assert f"succeeded (resume of {KILLED})" in table
    rows = {r["id"]: r for r in json.loads(cli("ls", "--json", cwd=store.root).out)["runs"]}
    assert rows[RESUMED]["kind"] == "resume" and rows[RESUMED]["parent"] == KILLED
    shown = cli("show", RESUMED, cwd=store.root).out
    assert f"resume of {KILLED}" in shown
    assert "checkpoints/last.pt (step 16, RNG states of 2 processes)" in shown
    record = json.loads(cli("show", RESUMED, "--json", cwd=store.root).out)
    assert record["resumed_from"] == KILLED and record["results"]["checkpoints"][0]["step"] == 16


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        (DONE, f"run {DONE} succeeded: there is nothing to resume"),
        (REPLAY, f"run {REPLAY} is a replay; resume the run it replays, {DONE}"),
        ("20990101", "no run matches '20990101'"),
    ],
)
def test_what_cannot_be_resumed_is_refused_in_one_line(cli, store: Store, ref: str, message: str) -> None:  # type: ignore[no-untyped-def]
    result = cli("resume", ref, cwd=store.root)
    assert result.code == 2 and result.out == ""
    assert result.err.startswith(f"repro: error: {message}") and "Traceback" not in result.err


def test_an_unsealed_run_that_kept_nothing_is_refused(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    store.begin_run("20260105-000000-aaa5", ["python", "train.py"])
    (store.runs_dir / "20260105-000000-aaa5" / "running.json").unlink()
    result = cli("resume", "20260105", cwd=store.root)
    assert result.code == 2 and "kept nothing to resume from" in result.err and "hint:" in result.err


def test_check_interrupt_needs_a_command(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    result = cli("check", "--interrupt", "2", "--against", "latest", cwd=store.root)
    assert result.code == 2 and "cannot be combined with --against" in result.err
