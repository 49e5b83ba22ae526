"""The store's budget (store.max_bytes): older kept checkpoint copies and outputs go, oldest first."""

from __future__ import annotations

from pathlib import Path

from repro.store import budget
from repro.store.record import CheckpointInfo, FileEntry, Record
from repro.store.runs import Store

MB = 1 << 20


def _sealed(store: Store, run_id: str, checkpoints: list[bytes], outputs: dict[str, bytes]) -> Record:
    """A sealed run whose traced checkpoints' copies and outputs' bytes are kept in the store."""
    record = Record(id=run_id, created=run_id)
    for step, data in enumerate(checkpoints, start=1):
        state = store.put_bytes(f"rng state of {run_id} at {step}".encode())
        record.results.checkpoints.append(
            CheckpointInfo(
                path="ckpt/last.pt",
                hash=f"{run_id}-{step}",
                step=step,
                states={"0": state},
                blob=store.put_bytes(data),
                size=len(data),
            )  # fmt: skip
        )
    for path, data in outputs.items():
        record.results.outputs.append(FileEntry(path, len(data), store.put_bytes(data), stored=True))
    store.seal(record, store.begin_run(run_id, ["python", "train.py"]))
    return record


def _blob(n: int, fill: int) -> bytes:
    return bytes([fill]) * (n * MB)


def test_over_the_budget_the_oldest_go_first_never_the_latest_of_a_run(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.ensure()
    _sealed(store, "20260101-000000-aaaa", [_blob(3, 1), _blob(3, 2)], {"outputs/model.pt": _blob(2, 3)})
    _sealed(store, "20260102-000000-bbbb", [_blob(3, 4), _blob(3, 5)], {"outputs/model.pt": _blob(2, 6)})
    assert budget.enforce(store, None).files == 0  # no budget: nothing goes

    freed = budget.enforce(store, 12 * MB)
    assert (freed.files, freed.bytes) == (2, 5 * MB)  # run 1's first checkpoint copy, then its model.pt
    assert freed.kept_bytes == 11 * MB and freed.runs == ["20260101-000000-aaaa"]
    first = store.load_run("20260101-000000-aaaa").record
    assert [c.blob is not None for c in first.results.checkpoints] == [False, True]
    assert first.results.outputs[0].stored is False  # "not kept", as an output over max_output_bytes
    assert all(store.has_blob(d) for d in first.blobs())  # what the record still names is all there
    assert all(store.has_blob(c.states["0"]) for c in first.results.checkpoints)  # states never go

    freed = budget.enforce(store, 0)  # nothing fits: still, the latest of each run stays
    assert (freed.files, freed.bytes) == (1, 3 * MB)  # run 2's first checkpoint copy
    for run_id in ("20260101-000000-aaaa", "20260102-000000-bbbb"):
        record = store.load_run(run_id).record
        assert record.results.checkpoints[-1].blob is not None and store.has_blob(
            record.results.checkpoints[-1].blob
        )
    newest = store.load_run("20260102-000000-bbbb").record
    assert newest.results.outputs[0].stored and store.has_blob(newest.results.outputs[0].hash)


def test_bytes_another_record_still_keeps_stay_on_disk(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.ensure()
    same = _blob(2, 7)
    _sealed(store, "20260101-000000-aaaa", [], {"outputs/a.bin": same, "outputs/old.bin": _blob(1, 8)})
    newer = {"outputs/a.bin": _blob(1, 9), "outputs/old.bin": _blob(1, 10), "outputs/copy.bin": same}
    _sealed(store, "20260102-000000-bbbb", [], newer)  # the same bytes as run 1's a.bin, another path
    freed = budget.enforce(store, 3 * MB)
    old = store.load_run("20260101-000000-aaaa").record
    assert [o.stored for o in old.results.outputs] == [False, False]
    assert (freed.files, freed.bytes) == (1, 1 * MB)  # the shared blob is still run 2's copy.bin
    assert freed.kept_bytes == 4 * MB  # over the budget: the rest is the latest of each path
    assert store.has_blob(old.results.outputs[0].hash)


def test_a_dry_run_changes_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.ensure()
    record = _sealed(store, "20260101-000000-aaaa", [_blob(1, 1), _blob(1, 2)], {})
    freed = budget.enforce(store, 0, dry_run=True)
    assert (freed.files, freed.bytes) == (1, MB)
    assert store.load_run(record.id).record.results.checkpoints[0].blob is not None
    assert store.has_blob(record.results.checkpoints[0].blob or "")
