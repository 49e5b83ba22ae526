"""`repro gc` with a store budget (store.max_bytes): what it frees, in bytes and files."""

from __future__ import annotations

from pathlib import Path

from repro.store.record import CheckpointInfo, Record
from repro.store.runs import Store

MB = 1 << 20


def _traced_run(store: Store, run_id: str, copies: list[bytes]) -> None:
    record = Record(id=run_id, created=run_id)
    for step, data in enumerate(copies, start=1):
        info = CheckpointInfo(path="checkpoints/last.pt", hash=f"{run_id}-{step}", step=step,
                              blob=store.put_bytes(data), size=len(data))  # fmt: skip
        record.results.checkpoints.append(info)
    store.seal(record, store.begin_run(run_id, ["python", "train.py"]))


def test_gc_brings_the_store_within_its_budget_and_says_what_it_freed(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "repro.yaml").write_text(f"backend: local\nstore:\n  max_bytes: {4 * MB}\n")
    store = Store(tmp_path)
    store.ensure()
    _traced_run(store, "20260101-000000-aaaa", [b"\1" * 2 * MB, b"\2" * 2 * MB, b"\3" * 2 * MB])
    dry = cli("gc", "--dry-run", cwd=tmp_path)
    assert dry.code == 0, dry.err
    assert "would remove 1 kept file of older runs over store.max_bytes (2.0 MiB" in dry.out
    assert "would free 2.0 MiB in 1 file" in dry.out
    r = cli("gc", cwd=tmp_path)
    assert r.code == 0, r.err
    assert "freed 2.0 MiB in 1 file" in r.out
    kept = [c.blob for c in store.load_run("20260101-000000-aaaa").record.results.checkpoints]
    assert kept[0] is None and all(kept[1:])  # the oldest went; the latest stays whatever the budget
    again = cli("gc", cwd=tmp_path)
    assert "freed" not in again.out


def test_a_bad_budget_is_one_line_with_its_hint(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "repro.yaml").write_text("backend: local\nstore:\n  max_bytes: -1\n")
    Store(tmp_path).ensure()
    r = cli("gc", cwd=tmp_path)
    assert r.code != 0 and "store.max_bytes must be 0.." in r.err and "Traceback" not in r.err
