"""The sandbox rule (repro/sandbox.py) and the store's own mark of runs from elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro import config, sandbox
from repro.errors import BackendUnavailable, ExitCode
from repro.store.capsule import RECORD_NAME
from repro.store.hashing import hash_bytes
from repro.store.record import CodeInfo, CommandInfo, FileEntry, Record
from repro.store.rundir import FOREIGN
from repro.store.runs import Store
from repro.store.tarwriter import pack


def _plan(root: Path, backend: str | None = None, environ: dict[str, str] | None = None) -> config.Plan:
    return config.resolve(root, config.Flags(backend=backend), environ=environ or {})


def test_a_run_made_here_replays_where_it_ran_unless_the_flag_or_environment_says_otherwise(
    tmp_path: Path,
) -> None:
    (tmp_path / "repro.yaml").write_text("backend: docker\n")
    placed = sandbox.place(_plan(tmp_path), "local", foreign=False)
    assert (placed.plan.settings.backend, placed.note, placed.sandboxed) == ("local", None, False)
    placed = sandbox.place(_plan(tmp_path, environ={"REPRO_BACKEND": "slurm"}), "local", foreign=False)
    assert placed.plan.settings.backend == "slurm" and placed.note is None


@pytest.mark.parametrize("recorded", ["local", "slurm"])
def test_a_run_from_elsewhere_replays_in_the_sandbox_whatever_its_record_or_the_project_file_says(
    tmp_path: Path, recorded: str
) -> None:
    (tmp_path / "repro.yaml").write_text("backend: local\n")  # a project file can come with the capsule
    placed = sandbox.place(_plan(tmp_path), recorded, foreign=True)
    assert placed.plan.settings.backend == "docker" and placed.sandboxed and placed.note is not None
    assert f"its record names backend {recorded}" in placed.note and "--backend local" in placed.note
    assert "repro.yaml's `backend: local` counts only for runs made here" in placed.note
    for plan in (_plan(tmp_path, "auto"), _plan(tmp_path, environ={"REPRO_BACKEND": "auto"})):
        placed = sandbox.place(plan, recorded, foreign=True)  # auto never falls back to the host
        assert placed.plan.settings.backend == "docker" and placed.sandboxed
        assert placed.note is not None and "container sandbox" in placed.note


def test_nothing_to_say_when_a_docker_run_from_elsewhere_replays_in_docker(tmp_path: Path) -> None:
    placed = sandbox.place(_plan(tmp_path), "docker", foreign=True)
    assert (placed.plan.settings.backend, placed.note, placed.sandboxed) == ("docker", None, True)


@pytest.mark.parametrize(
    ("backend", "environ", "said"),
    [("local", {}, "--backend local"), (None, {"REPRO_BACKEND": "local"}, "REPRO_BACKEND local")],
)  # fmt: skip
def test_the_replaying_side_names_a_host_backend_and_is_told_in_one_line(
    tmp_path: Path, backend: str | None, environ: dict[str, str], said: str
) -> None:
    placed = sandbox.place(_plan(tmp_path, backend, environ), "docker", foreign=True)
    assert placed.plan.settings.backend == (backend or "local") and not placed.sandboxed
    assert placed.note is not None and placed.note.startswith(said) and "unsandboxed" in placed.note
    assert "\n" not in placed.note


def test_a_run_from_elsewhere_named_onto_slurm_runs_in_the_container_sandbox_on_its_nodes(
    tmp_path: Path,
) -> None:
    from repro.backends import registry
    from repro.backends.slurm.options import SlurmOptions
    from repro.store.record import BackendInfo

    placed = sandbox.place(_plan(tmp_path, "slurm"), "slurm", foreign=True)
    assert placed.plan.settings.backend == "slurm" and placed.note is not None
    assert "container sandbox" in placed.note and "unsandboxed" not in placed.note and "\n" not in placed.note
    record = _record("20260101-000000-bbbb", tmp_path)
    record.backend = BackendInfo(name="slurm", details={"slurm": {"options": {"environment": "python"}}})
    own = registry.recorded_options("slurm", record)
    theirs = registry.recorded_options("slurm", record, foreign=True)
    assert isinstance(own, SlurmOptions) and own.environment == "python"  # a run made here: as it ran
    assert isinstance(theirs, SlurmOptions) and theirs.environment == registry.sandbox_here()
    assert registry.recorded_options("local", record, foreign=True) is None


def test_no_engine_for_the_sandbox_is_exit_3_naming_backend_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")  # nothing listens there
    placed = sandbox.place(_plan(tmp_path), "local", foreign=True)
    with pytest.raises(BackendUnavailable) as caught:
        sandbox.require_engine(placed)
    assert caught.value.exit_code == ExitCode.BACKEND_UNAVAILABLE
    assert "--backend local" in (caught.value.hint or "")
    sandbox.require_engine(sandbox.place(_plan(tmp_path, "local"), "local", foreign=True))  # nothing to check


def _record(run_id: str, blobs: Path) -> Record:
    code = b"print('trained')\n"
    digest = hash_bytes(code)
    (blobs / "blobs" / digest[:2]).mkdir(parents=True, exist_ok=True)
    (blobs / "blobs" / digest[:2] / digest).write_bytes(code)
    record = Record(id=run_id, created="2026-01-01T00:00:00+00:00")
    record.command = CommandInfo(argv=["python", "t.py"], cwd=".")
    record.code = CodeInfo(kind="snapshot", files=[FileEntry("t.py", len(code), digest, True)])
    return record


def test_the_store_marks_an_import_in_its_own_files_never_in_the_record(tmp_path: Path) -> None:
    src = tmp_path / "src"
    record = _record("20260101-000000-aaaa", src)
    tar = pack(record, lambda d: src / "blobs" / d[:2] / d, tmp_path / "c.tar")

    here = Store(tmp_path / "here")
    imported = here.import_run(here.open_capsule(tar))
    assert imported.foreign and here.is_foreign(record.id)
    assert (here.runs_dir / record.id / FOREIGN).is_file()
    assert b"foreign" not in (here.runs_dir / record.id / RECORD_NAME).read_bytes()
    assert here.resolve(record.id).foreign  # later, by its id: still from elsewhere
    assert here.resolve(str(here.runs_dir / record.id)).foreign

    own = Store(tmp_path / "own")  # the store that made the run: the same record stays its own
    own.seal(record, own.begin_run(record.id, ["python", "t.py"]))
    again = own.import_run(own.open_capsule(tar))
    assert not again.foreign and not own.resolve(record.id).foreign
    assert own.resolve(str(here.runs_dir / record.id)).foreign  # a run directory of another store
