"""The two sides of a comparison: a run's results as the comparison sees them, the tolerance asked
for, and what a record keeps of its verdict."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from repro.compare.verdict import Side, Tolerance, Verdict
from repro.diff import results
from repro.errors import ReproError
from repro.store.record import Record
from repro.store.runs import LoadedRun, Store


def of_run(loaded: LoadedRun) -> Side:
    """A run's results as the comparison sees them (`repro.diff.results`)."""

    def open_blob(digest: str) -> Path | None:
        return loaded.blob_path(digest)

    return results.side_of(loaded.record, loaded.read_blob, open_blob)


def tolerance(mode: str, atol: float | None, rtol: float | None) -> Tolerance | None:
    if atol is None and rtol is None:
        return None
    from repro.compare.verdict import tolerance_for

    base = tolerance_for(mode)
    return Tolerance(atol=base.atol if atol is None else atol, rtol=base.rtol if rtol is None else rtol)


def verification(verdict: Verdict, of: str) -> dict[str, str]:
    """What a replay's (or a check run's) record keeps of its verdict against run ``of``."""
    return {"of": of, "status": verdict.status, "summary": verdict.summary}


def outputs_only(s: Side) -> Side:
    """A resumed run logged only what followed its checkpoint: its outputs are what compare."""
    return dataclasses.replace(s, metrics=[], stdout="", trace=[], data_order={})


def resumed_note(store: Store, record: Record) -> str:
    """How a resumed run is replayed: its whole chain as one uninterrupted run."""
    chain = [record.id]
    ref = record.resumed_from
    while ref and ref not in chain and len(chain) < 1000:
        chain.insert(0, ref)
        try:  # a run of this store by its id: never a path the record names (`Store.resolve` opens files)
            ref = store.load_run(ref, lists=()).record.resumed_from
        except ReproError:
            break
    return (
        f"run {record.id} resumed an interrupted run: replayed as one uninterrupted run of its chain "
        f"({' → '.join(chain)}); outputs compared, not its logs"
    )
