"""The collect phase's inputs: the project files the run read that are neither code nor declared
data, recorded as its inputs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from repro.collect import attribution, produced
from repro.collect.reports import Reports
from repro.facts import inputs
from repro.integrations import trackers
from repro.store.record import Record
from repro.store.runs import Store
from repro.store.statcache import HashCache
from repro.units import human_bytes

if TYPE_CHECKING:
    from repro.backends.base import RunSpec

_SOURCE = (".py", ".pyc", ".pyi", ".so", ".pyd")


def undeclared(record: Record, reports: Reports, spec: RunSpec, resumed_from: set[str]) -> list[str]:
    """The project files the run read that are neither code nor declared data (nor its own outputs)."""
    # A file the run wrote and read back (a checkpoint, the model it evaluates) is its own output;
    # so is the checkpoint a resumed run continues from: its chain wrote it.
    candidates = reports.read - reports.written - resumed_from
    opened = {
        p for p in candidates if produced.is_file(*attribution.located(spec.project_root, p, spec.data))
    }
    # Source the interpreter imports is code, and so is every file of the code snapshot (a tracked
    # `conf/config.yaml` Hydra reads): a replay restores their bytes. Every other file read is an
    # input the replay should check.
    configs = {c.path for c in record.command.config_files}
    configs |= {e.path for e in record.code.files if e.stored}
    tracker_stores = trackers.store_paths(record)
    kept = [*spec.data, *spec.outputs, ".repro", ".git", "lockfiles", *tracker_stores]
    prefixes = tuple(p.rstrip("/") + "/" for p in kept)
    exact = {p.rstrip("/") for p in spec.data}
    found = sorted(
        p
        for p in opened
        if p not in configs and p not in exact and not p.startswith(prefixes) and not p.endswith(_SOURCE)
    )
    record.data.undeclared = found
    return found


def record_read(record: Record, found: list[str], root: Path, store: Store, limit: int) -> None:
    """Record the files the run read as its inputs (`repro.facts.inputs`), kept within ``limit``
    bytes; say which are not kept and how a replay gets them."""
    if not found:
        return
    with HashCache(store.cache_dir / "hashes.sqlite") as cache:
        read = inputs.record_read(found, root, store.put_file, limit, cache)
    record.data.inputs += read.inputs
    if read.inputs:
        paths = [i.path for i in read.inputs]
        shown = ", ".join(paths[:5]) + (f" (+{len(paths) - 5} more)" if len(paths) > 5 else "")
        record.warn(
            "undeclared_inputs",
            f"the run read files that are not declared data; recorded as its inputs: {shown} "
            "(a replay restores them; --data declares them)",
        )
    if read.not_kept:
        named = ", ".join(f"{p} ({human_bytes(n)})" for p, n in read.not_kept[:5])
        more = f" (+{len(read.not_kept) - 5} more)" if len(read.not_kept) > 5 else ""
        record.warn(
            "inputs_not_kept",
            f"the run read files over store.max_input_bytes ({human_bytes(limit)}): hashed, not kept: "
            f"{named}{more} (declare them with --data, or raise the limit, so a replay elsewhere has them)",
        )
    if read.secret:
        record.warn(
            "secret_inputs",
            "the run read files that look like credentials; not recorded as inputs: "
            + ", ".join(read.secret[:5]),
        )
