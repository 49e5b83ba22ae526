"""The collect phase's outputs: the files the run wrote, stored; Hydra's own files as logs; the
warnings about links, shared writes and files written outside the project."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from repro.collect import attribution, harvest, produced
from repro.collect.reports import Reports
from repro.facts import hydra
from repro.facts.secrets import Masker, config_bytes_secrets
from repro.integrations import trackers
from repro.run.prepared import Prepared
from repro.store.record import FileEntry, Record, RunWarning, SharedWrite
from repro.store.runs import Store

if TYPE_CHECKING:
    from repro.backends.base import RunSpec


def collect_outputs(
    record: Record,
    spec: RunSpec,
    store: Store,
    prepared: Prepared,
    masker: Masker,
    reports: Reports,
    logged: bytes | None,
) -> None:
    """The files the run wrote that are its outputs, stored; Hydra's own files as logs; a warning
    for each thing about them a user should know (links, shared writes, files outside the project);
    the metric series harvested from them, from stdout and beside ``logged`` (what the run logged)."""
    res = record.results
    res.output_roots = list(spec.outputs)
    claimed: set[str] = set()
    if spec.project_root.resolve() == store.root.resolve():  # other runs share this tree
        claimed = attribution.claimed_elsewhere(store.runs_dir, record.id, prepared.started_ns)
    found = attribution.select(
        spec.project_root, written=reports.written, declared=spec.outputs, before=prepared.outputs_before,
        data=spec.data, exclude=[*res.output_excludes, *trackers.store_paths(record)],
        claimed=claimed - reports.written,
    )  # fmt: skip
    jobs = hydra.job_dirs(found)
    bookkeeping = {rel for rel in found if hydra.is_bookkeeping(rel, jobs)} if jobs else set()
    limit = prepared.settings.max_output_bytes
    res.outputs = _store_outputs(spec, store, [f for f in found if f not in bookkeeping], limit, record)
    _hydra_bookkeeping(record, spec, store, masker, sorted(bookkeeping), len(jobs) == 1, limit)
    ranks = {rel: next(iter(w)).rank for rel, w in reports.writers.items() if len(w) == 1}
    sources = harvest.RunSources.read(spec.project_root, spec.stdout_path, spec.outputs, found, logged, ranks)
    wanted = harvest.HarvestSettings(prepared.settings.metrics_from, prepared.settings.metrics_patterns)
    harvest.fold(res, sources, wanted, lambda raw: store.put_bytes(masker.data(raw, "metrics")),
                 lambda text: masker.text(text, "metrics"))  # fmt: skip
    _shared_writes(record, reports)
    _link_warnings(record, spec.runtime_dir)
    record.warnings = [RunWarning(w.code, masker.text(w.message, "warnings")) for w in record.warnings]
    stores = trackers.outside_stores(record)
    outside = {p for p in reports.written_outside if not any(p == s or p.startswith(s + "/") for s in stores)}
    res.outputs_outside_root = sorted(outside)[:_MAX_OUTSIDE]
    if outside:
        shown = ", ".join(res.outputs_outside_root[:3])
        more = len(outside) - 3
        record.warn(
            "outputs_outside_root",
            f"the run wrote files outside the project root, which are not recorded: {shown}"
            + (f" (+{more} more)" if more > 0 else ""),
        )


_MAX_OUTSIDE = 200


def _hydra_bookkeeping(
    record: Record, spec: RunSpec, store: Store, masker: Masker, paths: list[str], one_job: bool, limit: int
) -> None:
    """Hydra's own files are logs of the run, not outputs, masked like logs (the composed config
    holds every override, its credentials included); its composed config becomes the run's params."""
    res = record.results
    for rel in paths:
        raw = produced.read_bytes(spec.project_root, rel, limit=limit)  # never through a link
        if raw is None:
            continue  # over the size limit, gone, or not a regular file
        found = config_bytes_secrets(rel, raw, masker.redactor)
        clean = (masker.add(found) if found else masker).data(raw, "the Hydra logs")
        res.logs[f"hydra:{rel}"] = store.put_bytes(clean)
        if rel.endswith("/" + hydra.CONFIG_NAME) and one_job:  # parsed before masking: `***` is no YAML
            composed = hydra.composed_params(raw.decode("utf-8", "replace"))
            record.command.params.update((masker.add(found) if found else masker).obj(composed, "params"))


def _store_outputs(
    spec: RunSpec, store: Store, found: list[str], max_bytes: int, record: Record
) -> list[FileEntry]:
    """Hash each output file and keep its bytes (up to the size limit); a link is recorded by its
    target, never read through (`repro.collect.produced`)."""
    entries: list[FileEntry] = []
    with produced.Dirs() as dirs:  # each directory opened once for all the outputs in it
        for rel in found:
            root, inner = attribution.located(spec.project_root, rel, spec.outputs)
            entry = produced.entry(root, inner, store.put_fd, max_bytes, as_rel=rel, dirs=dirs)
            if entry is None:
                continue  # gone since it was selected
            if entry.link is None and not entry.stored:
                record.warn(
                    "output_too_large",
                    f"output {rel} is over the size limit ({entry.size} bytes): hashed, not stored",
                )
            entries.append(entry)
    return entries


def _link_warnings(record: Record, runtime: Path) -> None:
    """Say which links the run made: among its outputs (recorded as links), and where repro reads its
    own reports (never read, so what they point at stays out of the record)."""
    made = [o for o in record.results.outputs if o.link is not None]
    if made:
        shown = ", ".join(f"{o.path} -> {o.link}" for o in made[:3]) + (
            f" (+{len(made) - 3} more)" if len(made) > 3 else ""
        )
        record.warn(
            "output_links", f"outputs that are symbolic links, recorded as links and never followed: {shown}"
        )
    planted = [f for f in produced.walk(runtime) if f.kind == "link"]
    if planted:
        shown = ", ".join(f"{f.rel} -> {f.target}" for f in planted[:3]) + (
            f" (+{len(planted) - 3} more)" if len(planted) > 3 else ""
        )
        record.warn(
            "runtime_links",
            "the run left symbolic links among repro's own files in its runtime directory, "
            f"not read: {shown}",
        )


def _shared_writes(record: Record, reports: Reports) -> None:
    """Outputs more than one process wrote: recorded, and named in one warning."""
    outputs = {o.path for o in record.results.outputs}
    shared = [
        SharedWrite(path, [w.rank for w in writers], [w.pid for w in writers])
        for path, writers in reports.shared(outputs).items()
    ]
    record.results.shared_writes = shared
    if shared:
        shown = "; ".join(f"{s.path} by {s.writers()}" for s in shared[:3]) + (
            f" (+{len(shared) - 3} more)" if len(shared) > 3 else ""
        )
        record.warn(
            "shared_writes",
            f"output files written by more than one process at once: {shown}. Their bytes depend on "
            "which process wrote last (a replay may differ or not load): write each from one rank "
            "(`if rank == 0:`)",
        )
