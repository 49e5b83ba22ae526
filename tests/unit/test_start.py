"""The one entry point every run starts through: the image rule, the status line, the lockfile restore."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from repro import start
from repro.backends import registry
from repro.backends.base import Event
from repro.backends.images import BuildsImage, ImageInputs
from repro.config import Settings
from repro.facts import lockplan
from repro.facts.seeds import make_seeds
from repro.run.execute import build_spec, hand_image
from repro.run.prepared import Prepared
from repro.store.record import Record
from repro.store.rundir import RunDir
from repro.store.runs import Store


def _unasked(index: str) -> None:
    """The index probe of a lock that is reused or compiled by a stand-in: never asked."""
    raise AssertionError(f"{index} asked, though nothing is compiled")


def _prepared(
    tmp_path: Path, lockfile: Path | None = None, lock: lockplan.PendingLock | None = None
) -> Prepared:
    record = Record(
        id="20261125-180000-0001", created="2026-11-25T18:00:00+00:00", project="p", repro_version="0"
    )
    record.seeds = make_seeds(7)
    run_dir = tmp_path / "runs" / record.id
    spec = build_spec(record, tmp_path, run_dir, [], ["outputs"], ["python", "train.py"])
    return Prepared(record, spec, run_dir, {}, Settings(), lock=lock, lockfile=lockfile)


def _ready_lock(tmp_path: Path, source: Path | None) -> lockplan.PendingLock:
    ready = lockplan.Lock(path=None, source=source)
    return lockplan.PendingLock(
        lockplan.LockPlan(root=tmp_path, variant="cpu", source=source, ready=ready), _unasked
    )


def test_an_image_is_built_exactly_when_the_run_has_dependencies_to_lock(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.in"
    requirements.write_text("torch==2.13.0\n")
    assert not start.must_build_image(_prepared(tmp_path))  # a new run with nothing declared
    assert not start.must_build_image(_prepared(tmp_path, lock=_ready_lock(tmp_path, None)))
    assert start.must_build_image(_prepared(tmp_path, lock=_ready_lock(tmp_path, requirements)))
    recorded = tmp_path / "requirements.lock.txt"
    assert start.must_build_image(_prepared(tmp_path, lockfile=recorded))  # a re-execution of a locked run


def test_a_recorded_lockfile_is_restored_into_the_run_directory(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.ensure()
    record = Record(
        id="20261125-180000-0002", created="2026-11-25T18:00:00+00:00", project="p", repro_version="0"
    )
    run_dir = store.begin_run(record.id, ["python", "train.py"])
    assert (
        start.restore_lockfile(record, store.read_blob, run_dir) is None
    )  # never locked: nothing to restore
    record.deps.lock_blob = store.put_bytes(b"torch==2.13.0 --hash=sha256:00\n")
    path = start.restore_lockfile(record, store.read_blob, run_dir)
    assert path == RunDir(run_dir).lockfile == run_dir / "work" / "requirements.lock.txt"
    assert path.read_bytes() == b"torch==2.13.0 --hash=sha256:00\n"


def test_the_status_line_and_a_backend_chosen_once(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path)
    line = start.status_line(f"run {prepared.record.id}", "local", prepared.record)
    assert line == f"run {prepared.record.id} · backend local · mode strict · seed 7"
    events: list[Event] = []
    where = start.Start("local")
    chosen = where.backend_for(prepared, events.append)
    assert chosen.name == "local" and where.backend_for(prepared, events.append) is chosen


def test_the_backends_that_build_an_image_are_handed_the_run_s_image_inputs(tmp_path: Path) -> None:
    lockfile = tmp_path / "requirements.lock.txt"
    prepared = _prepared(tmp_path, lockfile=lockfile)
    prepared.settings = dataclasses.replace(prepared.settings, base_image="deb:2", cuda_index="file:///w")
    builders = [entry.make() for entry in registry.ENTRIES if entry.locks_first]
    assert builders
    for backend in builders:
        assert isinstance(backend, BuildsImage)
        hand_image(prepared, backend)
        assert vars(backend)["inputs"] == ImageInputs(lockfile, "deb:2", "file:///w")
    others = [entry.make() for entry in registry.ENTRIES if not entry.locks_first]
    assert others and not any(isinstance(backend, BuildsImage) for backend in others)


def test_a_detached_job_keeps_the_image_inputs_it_was_built_from(tmp_path: Path) -> None:
    inputs = ImageInputs(tmp_path / "requirements.lock.txt", "deb:2", "file:///w", "4g")
    kept = json.loads(json.dumps(inputs.to_json()))
    assert ImageInputs.from_json(kept) == inputs
    older = {"argv": ["python"], "lockfile": None, "base_image": None, "cuda_index": None, "shm_size": "2g"}
    assert ImageInputs.from_json(older) == ImageInputs()  # a job file whose spec held them
