"""`repro run`, last phase: fold what the run left — logs, metrics, the runtime's reports, the
determinism state, the outputs — into the record, masked; then keep the store within its budget.

Imports nothing from `repro.backends` (the spec's and result's types only for type checking): what
it reads is the run's spec and result and the runtime's files (torchrun's rank logs: `ranks.py`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from repro.collect import attribution, checkpoints, produced, sealmask
from repro.collect.reports import Reports, ledger, read_reports
from repro.compare import dataorder
from repro.compare.trace import TRACE_LOG
from repro.facts import code as code_capture
from repro.facts.determinism import (
    explain_failure,
    state_warnings,
)
from repro.facts.secrets import Masker, Redactor, run_masker
from repro.integrations import trackers
from repro.run.collect_env import _merge_process_env
from repro.run.collect_outputs import collect_outputs
from repro.run.collect_ranks import _rank_logs, report_failed_node, report_failed_rank
from repro.run.collect_reads import record_read, undeclared
from repro.run.images import record_image
from repro.run.prepared import Prepared
from repro.runtime import contract
from repro.store import budget, limits
from repro.store.record import Record
from repro.store.runs import Store
from repro.units import human_bytes, plural

if TYPE_CHECKING:
    from repro.backends.base import RunResult, RunSpec


def _op_stream_files(runtime: Path) -> dict[str, str]:
    """The op streams the runtime wrote under ``runtime``, by their name in ResultInfo.logs
    (``ops`` for rank 0 or the single process, ``ops.rank<N>`` for the others)."""
    found: dict[str, str] = {}
    for rel in produced.files(runtime, contract.ranked(contract.OPS_FILE, "*")):
        rank = rel.rsplit(".rank", 1)[1].split(".")[0]
        if rank.isdigit():
            found[contract.STREAMS["ops"].log_name(int(rank))] = rel
    if contract.STREAMS["ops"].log not in found and produced.is_file(runtime, contract.OPS_FILE):
        found[contract.STREAMS["ops"].log] = contract.OPS_FILE
    return found


def fallback_masker(prepared: Prepared) -> Masker:
    return run_masker(dict(os.environ), [], [], Redactor(prepared.settings.secret_patterns))


def collect(
    record: Record,
    result: RunResult,
    spec: RunSpec,
    store: Store,
    prepared: Prepared,
    masker: Masker | None = None,
) -> None:
    """Fold logs, metrics, the in-process environment and the outputs into the record.

    Logs, metrics and logged params pass through ``masker``: a secret the script prints
    or logs is stored as ``***``. Without one (a run sealed later, by `repro resume` or after a
    Slurm job), the secrets of this process's environment and every credential shape are masked.
    """
    masker = masker or fallback_masker(prepared)
    runtime = spec.runtime_dir
    res = record.results
    res.exit_code = result.exit_code
    res.duration_s = round(result.duration_s, 3)
    res.status = "interrupted" if result.interrupted else ("succeeded" if result.exit_code == 0 else "failed")
    record.backend.details.update(result.details)
    if result.image and not record.deps.image:
        record_image(record, result.image, store)
    learned = sealmask.learn_logs(masker, [spec.stdout_path, spec.stderr_path])
    logged = _collect_logs(record, result, spec, store, masker)
    _merge_process_env(record, runtime)
    checkpoints.collect(record, runtime, store.put_fd, prepared.settings.max_checkpoint_bytes)
    trackers.fold(record, runtime)
    res.trackers = masker.obj(res.trackers, "tracker links")  # a tracking URI may carry a password
    reports = read_reports(runtime)
    reports.written |= set(result.written)
    _runtime_proof(record, reports)
    _determinism_state(record, runtime, reports)
    checkpoints.judge_resume(record, runtime, reports.main_booted)
    if not reports.main_booted and prepared.tree_before is not None:
        # No runtime watched the writes: whatever changed in the project is this run's.
        reports.written |= attribution.changed_since(spec.project_root, prepared.tree_before, spec.data)
    trackers.find_runs(record, reports.written)
    record.seeds.script_seeds = reports.script_seeds
    found = undeclared(record, reports, spec, checkpoints.loaded_paths(runtime))
    record_read(record, found, spec.project_root, store, prepared.settings.max_input_bytes)
    if reports.main_booted:  # what the code the run imported and opened was, for `repro resume`
        record.code.read = code_capture.files_read(record.code, reports.read)
    collect_outputs(record, spec, store, prepared, masker, reports, logged)
    sealmask.warn_secrets_in_outputs(record, store, masker)
    sealmask.mask_sealed(record, store, masker, learned)


def _collect_logs(
    record: Record, result: RunResult, spec: RunSpec, store: Store, masker: Masker
) -> bytes | None:
    """Keep the command's streams, each rank's, the metrics, the step trace and the logged params,
    masked; name the rank or node that failed first. Returns the metrics the run logged, as written."""
    runtime = spec.runtime_dir
    res = record.results

    def keep(name: str, root: Path, rel: str, where: str) -> None:
        raw = produced.read_bytes(root, rel, limit=None)
        if raw is not None:
            res.logs[name] = store.put_bytes(masker.data(raw, where))

    for name, path in (("stdout", spec.stdout_path), ("stderr", spec.stderr_path)):
        keep(name, path.parent, path.name, "the logs")
    res.stderr_tail = [masker.text(line, "the logs") for line in _tail(spec.stderr_path, 20)]
    rank_logs = _rank_logs(runtime)
    for rank, streams in sorted(rank_logs.items()):
        for name, rel in sorted(streams.items()):
            keep(f"rank{rank}.{name}", runtime, rel, "the logs")
    failed = result.details.get("failed")
    if res.status == "failed" and isinstance(failed, dict):
        report_failed_node(record, failed, runtime, rank_logs)
    elif res.status == "failed" and rank_logs:
        report_failed_rank(record, spec, rank_logs)
    res.stderr_tail = [masker.text(line, "the logs") for line in res.stderr_tail]
    for extra in produced.files(runtime, contract.ranked(contract.METRICS_FILE, "*")):
        keep(extra.removesuffix(".jsonl").replace("metrics.", "metrics-"), runtime, extra, "metrics")
    trace = next(
        (
            r
            for r in (contract.TRACE_FILE, contract.ranked(contract.TRACE_FILE, 0))
            if produced.is_file(runtime, r)
        ),
        None,
    )
    if trace is not None:
        keep(TRACE_LOG, runtime, trace, "the step trace")
    written = [r for rank in ("*", -1) for r in produced.files(runtime, dataorder.runtime_files(rank))]
    for name, rel in sorted(dataorder.kept_logs(written).items()):
        keep(name, runtime, rel, "the data order")
    for name, rel in _op_stream_files(runtime).items():  # `--ops`: each process's op stream
        keep(name, runtime, rel, "the op stream")
    metrics = produced.read_stream(runtime, contract.METRICS_FILE, limits.MAX_METRICS_BYTES)
    if metrics is not None:
        res.metrics = store.put_bytes(masker.data(metrics, "metrics"))
        res.final_metrics = {masker.text(k, "metrics"): v for k, v in _final_metrics(metrics).items()}
    params = produced.read_json(runtime, contract.PARAMS_FILE)
    if params:
        res.params = masker.obj(params, "logged params")
    return metrics


def _determinism_state(record: Record, runtime: Path, reports: Reports) -> None:
    """The ledger of nondeterministic ops, the switches as the run left them, and why it failed."""
    det = record.determinism
    det.nondeterministic_ops, fatal = ledger(reports.nondeterministic)
    state = produced.read_json(runtime, contract.ranked(contract.STATE_FILE, 0)) or produced.read_json(
        runtime, contract.STATE_FILE
    )
    det.effective = dict(state.get("effective") or {})
    det.changed_by_script = dict(state.get("changed_by_script") or {})
    record.warnings += state_warnings(det)
    if record.results.status == "failed":
        found = explain_failure(det, fatal, record.results.stderr_tail)
        record.results.failure = found or record.results.failure  # or the compile's (compile_warnings)
    for error in reports.errors:
        record.warn("runtime_settings_failed", f"the repro runtime could not apply its settings to {error}")
    for rel in produced.files(runtime, "boot-error.*.txt"):
        text = (produced.read_text(runtime, rel) or "").strip()[:2000]
        record.warn("runtime_boot_failed", f"the repro runtime failed to start in a process: {text}")


def _runtime_proof(record: Record, reports: Reports) -> None:
    """Record whether the runtime ran; when it never loaded, nothing repro promised was applied."""
    det = record.determinism
    det.applied = reports.main_booted
    if det.applied:
        return
    det.knobs = {}
    record.warn(
        "runtime_not_loaded",
        "the repro runtime never loaded in this command (a reset PYTHONPATH, `python -I`/`-E`/`-S`, "
        "or not Python): seeds and determinism were NOT applied, so this run is not reproducible by "
        f"construction (recorded mode {det.mode}, not applied)",
    )


def _tail(path: Path, n: int) -> list[str]:
    """The last ``n`` lines of a log (its last 64 KiB); none when it is not a regular file."""
    try:
        with produced.open_file(path.parent, path.name) as fd:
            size = os.fstat(fd).st_size
            os.lseek(fd, max(0, size - 64 * 1024), os.SEEK_SET)
            raw = os.read(fd, 64 * 1024)
    except OSError:
        return []
    return raw.decode("utf-8", "replace").splitlines()[-n:]


def _final_metrics(raw: bytes) -> dict[str, float]:
    """Each metric's last value (rows read by the contract's one tolerant reader)."""
    final: dict[str, float] = {}
    for row in contract.metric_rows(raw.decode("utf-8", "replace")):
        with contextlib.suppress(ValueError, TypeError):
            final[str(row["name"])] = float(row["value"])
    return final


def keep_within_budget(store: Store, max_bytes: int | None, note: Callable[[str], None]) -> None:
    """After a seal: the store's kept checkpoint copies and outputs back within ``store.max_bytes``."""
    if max_bytes is None:
        return
    try:
        freed = budget.enforce(store, max_bytes)
    except OSError as e:  # the run is sealed: the budget waits for the next run or `repro gc`
        note(f"store.max_bytes: could not free space in the store ({e})")
        return
    if freed.files:
        note(
            f"store.max_bytes: removed {plural(freed.files, 'kept file')} of older runs "
            f"({human_bytes(freed.bytes)}), marked not kept in their records"
        )
