"""The data order of two runs: the first step, rank and DataLoader whose samples differ, and the worker seeds.

The runtime (`repro.runtime.batchorder`) records, per rank, one row per DataLoader batch
with a running digest of the sample indices, and one row per iteration over a loader with
the base seed of its workers. Each rank's rows are kept in the record's logs (`log_name`).
Comparing two runs finds the earliest step (then rank, then loader by creation order) whose
digest differs, and the earliest epoch whose worker base seed differs. Runs with different
sets of ranks (another world size) shard their data differently: they are not compared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from repro.runtime import contract
from repro.store import limits

DATA_ORDER_LOG = contract.STREAMS["dataorder"].log  # ResultInfo.logs: dataorder, dataorder.rank<R>
SHOWN_INDICES = 8  # indices quoted in a message


BatchDiffKind = Literal["indices", "length"]


@dataclass
class OrderDivergence:
    """The first batch whose samples differ between two runs."""

    step: int  # batches the loader had yielded before it
    rank: int  # -1: not a torchrun rank
    loader: int  # by creation order, from 0
    epoch: int | None
    kind: BatchDiffKind  # indices: other samples | length: one run drew more batches
    original: list[Any] | None  # the batch's indices, where recorded within the budget
    replay: list[Any] | None


@dataclass
class SeedDivergence:
    """The first iteration over a DataLoader whose workers' base seed differs."""

    epoch: int
    rank: int
    loader: int
    original: int | None
    replay: int | None


@dataclass
class DataOrderReport:
    """What differs in the data order of two runs (None: that part is equal)."""

    order: OrderDivergence | None = None
    worker_seeds: SeedDivergence | None = None

    @property
    def differs(self) -> bool:
        return self.order is not None or self.worker_seeds is not None


Rows = dict[int, list[dict[str, Any]]]  # rank → rows of its data-order file


def log_name(rank: int) -> str:
    """The name of a rank's data order in a record's logs (rank < 0: the only process)."""
    return contract.STREAMS["dataorder"].log_name(rank)


def rank_of(name: str) -> int | None:
    """The rank a log name holds the data order of; None when it is not a data-order log."""
    return contract.STREAMS["dataorder"].log_rank(name)


def runtime_files(rank: int | str) -> str:
    """The file a rank's runtime writes (``"*"``: the glob of every rank's)."""
    return contract.ranked(contract.DATA_ORDER_FILE, rank)


def kept_logs(runtime_files: list[str]) -> dict[str, str]:
    """The data-order files among a runtime folder's files, by the log name each is kept under."""
    found = {}
    for rel in runtime_files:
        name = rel.removesuffix(".jsonl")
        if "/" not in rel and rank_of(name) is not None:
            found[name] = rel
    return found


def parse(text: str) -> list[dict[str, Any]]:
    """The rows of a data-order file (a half-written last line is skipped)."""
    return contract.jsonl_rows(text, lambda row: isinstance(row.get("loader"), int))


def read(
    logs: Mapping[str, str], read_blob: Callable[[str], bytes | None], cut: list[str] | None = None
) -> Rows:
    """Each rank's rows from a record's logs (empty: the run recorded no data order), each log read
    no further than `limits.MAX_COMPARED_DATA_ORDER_BYTES`; where one is cut there, the one line
    saying so is added to ``cut``."""
    found: Rows = {}
    bound = limits.MAX_COMPARED_DATA_ORDER_BYTES
    for name, blob in logs.items():
        rank = rank_of(name)
        if rank is not None:
            text, was_cut = limits.stream_head(read_blob(blob), bound)
            found[rank] = parse(text)
            if was_cut and cut is not None:
                cut.append(limits.cut_note(f"the data-order log of rank {rank}", bound))
    return {rank: rows for rank, rows in found.items() if rows}


def compare(original: Rows, replay: Rows) -> DataOrderReport | None:
    """The first differences in data order; None when either run recorded none or their ranks differ."""
    if not original or not replay or set(original) != set(replay):
        return None
    orders = [d for rank in sorted(original) for d in _order(rank, original[rank], replay[rank])]
    seeds = [d for rank in sorted(original) for d in _seeds(rank, original[rank], replay[rank])]
    return DataOrderReport(
        order=min(orders, key=lambda d: (d.step, d.rank, d.loader), default=None),
        worker_seeds=min(seeds, key=lambda d: (d.epoch, d.rank, d.loader), default=None),
    )


def _batches(rows: list[dict[str, Any]]) -> dict[int, dict[int, dict[str, Any]]]:
    found: dict[int, dict[int, dict[str, Any]]] = {}
    for row in rows:
        if isinstance(row.get("step"), int) and isinstance(row.get("digest"), str):
            found.setdefault(row["loader"], {}).setdefault(row["step"], row)
    return found


def _order(rank: int, a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[OrderDivergence]:
    """Per loader, the first step whose running digest differs or that only one run reached."""
    found = []
    ba, bb = _batches(a), _batches(b)
    for loader in sorted(ba.keys() | bb.keys()):
        sa, sb = ba.get(loader, {}), bb.get(loader, {})
        for step in sorted(sa.keys() | sb.keys()):
            x, y = sa.get(step), sb.get(step)
            if x is not None and y is not None and x["digest"] == y["digest"]:
                continue
            kind: BatchDiffKind = "indices" if x is not None and y is not None else "length"
            epoch = (x or y or {}).get("epoch")
            found.append(
                OrderDivergence(
                    step,
                    rank,
                    loader,
                    epoch if isinstance(epoch, int) else None,
                    kind,
                    _indices(x),
                    _indices(y),
                )  # fmt: skip
            )
            break
    return found


def _indices(row: dict[str, Any] | None) -> list[Any] | None:
    got = row.get("indices") if row is not None else None
    if got is None:
        return None
    return got if isinstance(got, list) else [got]


def _seeds(rank: int, a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[SeedDivergence]:
    def seeds(rows: list[dict[str, Any]]) -> dict[tuple[int, int], Any]:
        return {(r["loader"], r["epoch"]): r["base_seed"] for r in rows if "base_seed" in r and "epoch" in r}

    sa, sb = seeds(a), seeds(b)
    common = sorted(sa.keys() & sb.keys(), key=lambda k: (k[1], k[0]))
    for loader, epoch in common:
        if sa[(loader, epoch)] != sb[(loader, epoch)]:
            return [SeedDivergence(epoch, rank, loader, sa[(loader, epoch)], sb[(loader, epoch)])]
    return []


def where(rank: int, loader: int) -> str:
    """``rank 1, DataLoader #2`` (loaders counted from 1 by creation order)."""
    return (f"rank {rank}, " if rank >= 0 else "") + f"DataLoader #{loader + 1}"


def describe_order(d: OrderDivergence) -> str:
    """One sentence: where the data order first differs, and the samples on each side."""
    at = f"{where(d.rank, d.loader)}, step {d.step}" + (f" (epoch {d.epoch})" if d.epoch is not None else "")
    if d.kind == "length":
        side = "original" if d.original is not None else "replay"
        return f"data order differs: only the {side} drew a batch at {at}"
    shown = f" ({_head(d.original)} vs {_head(d.replay)})" if d.original and d.replay else ""
    return f"data order differs at {at}: the DataLoader yielded other samples{shown}"


def describe_seeds(d: SeedDivergence) -> str:
    """One sentence: the first iteration whose DataLoader workers were seeded differently."""
    return (
        f"DataLoader worker seeds differ at {where(d.rank, d.loader)}, epoch {d.epoch}: "
        f"base seed {d.original} vs {d.replay}"
    )


def _head(indices: list[Any] | None) -> str:
    shown = list(indices or [])[:SHOWN_INDICES]
    more = ", …" if indices and len(indices) > SHOWN_INDICES else ""
    return "[" + ", ".join(str(i) for i in shown) + more + "]"
