"""`repro resume CAPSULE` refuses, in one line and before anything runs, a capsule it cannot continue:
its run finished, it carries none of its outputs, or a path in it leaves the project."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.unit.test_hostile_capsules import _edit_record, _forge, _genuine, _set


def _capsule(tmp_path: Path, *edits) -> Path:  # type: ignore[no-untyped-def]
    tar, _ = _genuine(tmp_path)

    def edit(data) -> None:  # type: ignore[no-untyped-def]
        for change in edits:
            change(data)

    return _forge(tar, tmp_path / "forged.tar", _edit_record(edit))


def _resume(cli, tmp_path: Path, capsule: Path) -> CliResult:  # type: ignore[no-untyped-def]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result: CliResult = cli("resume", str(capsule), cwd=elsewhere)
    assert len(result.err.strip().splitlines()) <= 2, result.err  # the error and its hint
    assert "Traceback" not in result.err
    assert not (elsewhere / ".repro" / "runs").is_dir() or not any(  # nothing ran
        (p / "work").exists() for p in (elsewhere / ".repro" / "runs").iterdir()
    )
    return result


def test_a_capsule_of_a_run_that_succeeded_is_not_resumed(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = _resume(cli, tmp_path, _capsule(tmp_path, _set("results.status", "succeeded")))
    assert r.code == 2
    assert "holds run 20260101-000000-abcd, which succeeded: there is nothing to resume" in r.err
    assert "repro replay forged.tar" in r.err


def test_a_capsule_without_its_outputs_has_nothing_to_resume_from(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = _resume(cli, tmp_path, _capsule(tmp_path, _set("results.status", "interrupted")))
    assert r.code == 2
    assert "without its outputs (its checkpoints): nothing to resume from" in r.err


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("results.outputs.0.path", "../../evil.pt"),  # the checkpoint file the capsule carries
        ("results.checkpoints", [{"path": "checkpoints/../../evil.pt", "hash": "a" * 64}]),  # its save
    ],
)
def test_a_checkpoint_with_a_path_outside_the_project_is_refused_exit_6(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, field: str, value: object
) -> None:
    capsule = _capsule(tmp_path, _set("results.status", "interrupted"), _set(field, value))
    r = _resume(cli, tmp_path, capsule)
    assert r.code == 6, r.err
    assert "evil.pt" in r.err
    assert not (tmp_path / "evil.pt").exists()
