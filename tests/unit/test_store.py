from __future__ import annotations

from pathlib import Path

import pytest

from repro.errors import NotFoundError, UsageError
from repro.store.record import Record
from repro.store.runs import Store, find_project_root, new_run_id
from tests.builders import sealed


def test_run_ids_sort_by_time() -> None:
    from datetime import datetime, timezone

    a = new_run_id(datetime(2026, 1, 1, tzinfo=timezone.utc))
    b = new_run_id(datetime(2026, 1, 2, tzinfo=timezone.utc))
    assert a < b
    same_second = [
        new_run_id(datetime(2026, 1, 1, 0, 0, 0, ms * 1000, tzinfo=timezone.utc)) for ms in range(0, 1000, 7)
    ]
    assert same_second == sorted(same_second)
    assert all(len(i.rsplit("-", 1)[1]) == 4 for i in same_second)


def test_refs(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for rid in ("20260101-000000-aaaa", "20260102-000000-bbbb", "20260103-000000-bbbc"):
        sealed(store, rid)
    assert store.resolve("latest").record.id == "20260103-000000-bbbc"
    assert store.resolve("latest~2").record.id == "20260101-000000-aaaa"
    assert store.resolve("20260101").record.id == "20260101-000000-aaaa"
    assert store.resolve(str(store.runs_dir / "20260102-000000-bbbb")).record.id == "20260102-000000-bbbb"
    with pytest.raises(UsageError):
        store.resolve("2026010")  # ambiguous
    with pytest.raises(NotFoundError):
        store.resolve("latest~3")
    with pytest.raises(NotFoundError):
        store.resolve("nope")


def test_unsealed_run_is_listed_incomplete_and_not_latest(tmp_path: Path) -> None:
    store = Store(tmp_path)
    sealed(store, "20260101-000000-aaaa")
    run_dir = store.begin_run("20260102-000000-bbbb", ["python", "t.py"])
    (run_dir / "running.json").write_text('{"pid": 999999999, "argv": ["python", "t.py"]}')
    statuses = {r.id: r.status for r in store.rows()}
    assert statuses == {"20260101-000000-aaaa": "succeeded", "20260102-000000-bbbb": "incomplete"}
    assert store.resolve("latest").record.id == "20260101-000000-aaaa"
    with pytest.raises(NotFoundError) as e:
        store.resolve("20260102-000000-bbbb")
    assert "incomplete" in str(e.value)


def test_blobs_are_stored_once(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.ensure()
    a = store.put_bytes(b"same")
    src = tmp_path / "f"
    src.write_bytes(b"same")
    assert store.put_file(src) == a
    assert len(list(store.blobs_dir.rglob("*"))) == 2  # one fan-out dir, one blob


def test_project_root_is_found_upward(tmp_path: Path) -> None:
    (tmp_path / ".repro").mkdir()
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_project_root(deep) == tmp_path.resolve()


def test_a_detached_job_is_listed_with_its_last_seen_state(tmp_path: Path) -> None:
    import json

    from repro.store.runs import DETACHED

    store = Store(tmp_path)
    run_dir = store.begin_run("20261122-120000-0001", ["python", "t.py"])
    marker = json.loads((run_dir / "running.json").read_text())
    marker.update(pid=2**22 + 7, status="pending", detached=True)  # the submitting process is gone
    (run_dir / "running.json").write_text(json.dumps(marker))
    assert [(r.status, r.backend) for r in store.rows()] == [("incomplete", None)]  # no job marker
    (run_dir / DETACHED).write_text("{}")
    assert [(r.status, r.backend) for r in store.rows()] == [("pending", "slurm")]
    assert store.detached_runs() == [run_dir / DETACHED]


def test_earlier_writers_name_the_latest_run_that_wrote_those_bytes(tmp_path: Path) -> None:
    from repro.store.record import FileEntry

    store = Store(tmp_path)
    assert store.earlier_writers({"model.pt": "h1"}) == {}  # no index yet
    for run_id, digest in (("20260101-000000-aaaa", "h1"), ("20260102-000000-bbbb", "h1")):
        record = Record(id=run_id, created="2026-01-01T00:00:00+00:00")
        record.results.outputs = [FileEntry("model.pt", 1, digest, True)]
        store.seal(record, store.begin_run(run_id, ["python", "t.py"]))
    assert store.earlier_writers({"model.pt": "h1", "other.pt": "h1"}) == {"model.pt": "20260102-000000-bbbb"}
    assert store.earlier_writers({"model.pt": "h2"}) == {}  # other bytes: the user's, not a run's
    store.remove_run("20260102-000000-bbbb")
    assert store.earlier_writers({"model.pt": "h1"}) == {"model.pt": "20260101-000000-aaaa"}
    replay = Record(id="20260103-000000-cccc", created="2026-01-01T00:00:00+00:00", kind="replay")
    replay.results.outputs = [FileEntry("model.pt", 1, "h1", True)]  # written in a scratch copy
    store.seal(replay, store.begin_run(replay.id, ["python", "t.py"]))
    assert store.earlier_writers({"model.pt": "h1"}) == {"model.pt": "20260101-000000-aaaa"}


def test_a_helper_execution_is_hidden_from_listings_and_latest_and_reached_by_its_id(tmp_path: Path) -> None:
    store = Store(tmp_path)
    sealed(store, "20260101-000000-aaaa")
    store.mark_helper("20260102-000000-bbbb", "an experiment on run 20260101-000000-aaaa")
    sealed(store, "20260102-000000-bbbb")
    store.mark_helper("20260103-000000-cccc", "an experiment cut short")
    run_dir = store.begin_run("20260103-000000-cccc", ["python", "t.py"])
    (run_dir / "running.json").write_text('{"pid": 999999999, "argv": ["python", "t.py"]}')  # it died
    assert [r.id for r in store.rows()] == ["20260101-000000-aaaa"]
    assert store.resolve("latest").record.id == "20260101-000000-aaaa"
    assert store.resolve("20260102-000000-bbbb").record.id == "20260102-000000-bbbb"
    everything = {r.id: r.status for r in store.rows(helpers=True)}  # what `repro gc` cleans up
    assert everything["20260103-000000-cccc"] == "incomplete" and len(everything) == 3
