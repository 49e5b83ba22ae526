"""`repro.capture(...)`: record a run from inside a process that cannot be wrapped (a notebook, a service).

    with repro.capture(data=["data"], outputs=["outputs"], seed=42):
        train()

On entry: the code (git state or snapshot, plus notebook cells when given), the declared
data's hashes, the machine and the installed packages are recorded, and the seed is applied
to `random`, and to NumPy and torch where they are already imported. Inside the block the
optional API (`repro.log_metric`, `repro.log_params`) and the integrations write to the run.
On exit the outputs (files new or changed in the output dirs) are hashed and stored and the
record is sealed, failed if the block raised.

Weaker than `repro run`, and the record says so (``captured_in_process``): no container,
nothing seeded before the process started (PYTHONHASHSEED, libraries imported earlier keep
their state), no determinism knobs, files read or written are not watched, and the command
cannot be replayed.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from repro import __version__
from repro.collect import attribution, produced
from repro.config import Settings, resolve
from repro.facts import code as code_capture
from repro.facts import command as cmd
from repro.facts import lockvariants
from repro.facts.data import capture_data
from repro.facts.determinism import plan
from repro.facts.env import host_env
from repro.facts.secrets import Masker, Redactor, run_masker
from repro.facts.secrets.verdicts import VERDICTS_DB, Verdicts
from repro.facts.seeds import make_seeds
from repro.run.prepared import now_iso
from repro.runtime import contract
from repro.store import limits
from repro.store.record import CommandInfo, Record, RunWarning
from repro.store.rundir import RunDir
from repro.store.runs import Store, new_run_id
from repro.store.statcache import HashCache

IN_PROCESS_NOTE = (
    "captured in-process: no container, seeds applied late (after the process started), "
    "no determinism knobs, reads and writes not watched; this record cannot be replayed"
)
_RUN_VARS = (
    contract.RUN_ID_ENV,
    contract.RUNTIME_DIR_ENV,
    contract.SEED_ENV,
    contract.MODE_ENV,
    contract.PROJECT_ROOT_ENV,
)


class InProcessRun:
    """The run being recorded; `record` is complete (sealed) once the block has ended."""

    def __init__(self, record: Record, run_dir: Path) -> None:
        self.record = record
        self.run_dir = run_dir

    @property
    def id(self) -> str:
        return self.record.id


@contextlib.contextmanager
def capture(
    data: Sequence[str] = (),
    outputs: Sequence[str] = (),
    seed: int | None = None,
    *,
    cells: str | None = None,
    start: str | os.PathLike[str] | None = None,
) -> Iterator[InProcessRun]:
    """Record the code, data, environment, seed, metrics and outputs of the block as one run.

    ``cells``: notebook code executed so far, recorded as the run's code beside the project's.

    Raises:
        NotFoundError: declared data is missing. ConfigError: a bad repro.yaml.
    """
    store = Store.open(Path(start) if start else Path.cwd())
    settings = resolve(store.root).settings
    data_dirs = list(data) or list(settings.data)
    output_dirs = list(outputs) or list(settings.outputs)
    record, run_dir, masker = _begin(store, settings, data_dirs, output_dirs, seed, cells)
    before = attribution.snapshot(store.root, output_dirs)
    saved = {k: os.environ.get(k) for k in _RUN_VARS}
    os.environ.update(_variables(record, run_dir, store.root))
    started = time.perf_counter()
    run = InProcessRun(record, run_dir)
    failed = True
    try:
        yield run
        failed = False
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _finish(record, run_dir, store, settings, output_dirs, data_dirs, before, failed, started, masker)


def _begin(
    store: Store, settings: Settings, data: list[str], outputs: list[str], seed: int | None, cells: str | None
) -> tuple[Record, Path, Masker]:
    """Record what decides the run; returns the record, its directory and the masker its params,
    metrics and code pass through (the same rules as `repro run`)."""
    root = store.root
    redactor = Redactor(settings.secret_patterns)
    record = Record(id=new_run_id(), created=now_iso(), project=root.name, repro_version=__version__)
    record.captured_in_process = True
    raw_argv = [sys.executable, *sys.argv]
    argv, hits = redactor.argv(raw_argv)
    cwd = Path.cwd().resolve()
    rel_cwd = cwd.relative_to(root).as_posix() if cwd.is_relative_to(root) else "."
    configs = cmd.config_files(cmd.script_args(raw_argv), cwd, root)
    masker = run_masker(dict(os.environ), raw_argv, configs, redactor)
    record.command = CommandInfo(argv=argv, cwd=rel_cwd or ".")
    record.redactions += hits
    store.ensure()
    with HashCache(store.cache_dir / "hashes.sqlite") as cache:
        with Verdicts(store.cache_dir / VERDICTS_DB, settings.secret_patterns) as verdicts:
            put = code_capture.MaskedPut(store, masker, root, verdicts)
            code = code_capture.capture_code(
                root, put, exclude=[*data, *outputs, lockvariants.LOCK_DIR], cache=cache,
                max_file_bytes=settings.max_code_file_bytes, earlier_writers=store.earlier_writers,
                credential=put.credential,
            )  # fmt: skip
        masker = masker.add(put.found)
        code.patch = masker.text(code.patch, "the uncommitted patch", printed=False)
        code_capture.store_patch(code, store.put_bytes)
        record.code = code.info
        record.warnings += code.warnings
        record.data.inputs = capture_data(data, root, cache=cache)
    if cells is not None:
        record.code.cells = store.put_bytes(masker.data(cells.encode(), "the notebook cells", printed=False))
    env, env_hits = host_env(redactor, settings.env_allow)
    record.env = env
    record.redactions += env_hits
    record.deps.freeze = _installed()
    record.seeds = make_seeds(seed if seed is not None else settings.seed, 1)
    record.determinism = plan("off", settings.threads or 1, None)  # off pins no thread count
    record.determinism.knobs = _apply_seed(record.seeds.master)
    record.backend.name = record.backend.requested = "in-process"
    record.results.started = now_iso()
    record.results.output_roots = outputs
    record.warn("in_process", IN_PROCESS_NOTE)
    run_dir = store.begin_run(record.id, argv)
    RunDir(run_dir).runtime.mkdir(parents=True, exist_ok=True)
    return record, run_dir, masker


def _variables(record: Record, run_dir: Path, root: Path) -> dict[str, str]:
    """What the optional API and the integrations read to find the run."""
    return {
        contract.RUN_ID_ENV: record.id,
        contract.RUNTIME_DIR_ENV: str(RunDir(run_dir).runtime),
        contract.SEED_ENV: str(record.seeds.master),
        contract.MODE_ENV: record.determinism.mode,
        contract.PROJECT_ROOT_ENV: str(root),
    }


def _apply_seed(seed: int) -> dict[str, Any]:
    """Seed `random`, and NumPy and torch if the process has imported them; say which."""
    random.seed(seed)
    seeded = ["random"]
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % 2**32)
        seeded.append("numpy")
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
        seeded.append("torch")
    return {"seeded_in_process": seeded}


def _installed() -> list[str]:
    from repro.runtime import dists

    found: dict[str, str] = {}
    for raw, version, _ in dists.installed():
        name = raw.lower().replace("_", "-")
        if name:
            found.setdefault(name, version)
    return [f"{k}=={v}" for k, v in sorted(found.items())]


def _finish(
    record: Record, run_dir: Path, store: Store, settings: Settings, outputs: list[str], data: list[str],
    before: dict[str, tuple[int, int, int]], failed: bool, started: float, masker: Masker,
) -> None:  # fmt: skip
    res = record.results
    res.finished = now_iso()
    res.duration_s = round(time.perf_counter() - started, 3)
    res.status, res.exit_code = ("failed", 1) if failed else ("succeeded", 0)
    runtime = RunDir(run_dir).runtime
    metrics = produced.read_stream(runtime, contract.METRICS_FILE, limits.MAX_METRICS_BYTES)
    if metrics is not None:
        res.metrics = store.put_bytes(masker.data(metrics, "metrics"))
        for row in contract.metric_rows(metrics.decode("utf-8", "replace")):
            with contextlib.suppress(TypeError, ValueError):
                res.final_metrics[masker.text(str(row["name"]), "metrics")] = float(row["value"])
    params = produced.read_json(runtime, contract.PARAMS_FILE)
    if params:
        res.params = masker.obj(params, "logged params")
    from repro.integrations import trackers

    trackers.fold(record, runtime)
    res.trackers = masker.obj(res.trackers, "tracker links")
    record.warnings = [RunWarning(w.code, masker.text(w.message, "warnings")) for w in record.warnings]
    found = attribution.select(
        store.root, written=set(), declared=outputs, before=before, data=data,
        exclude=list(settings.outputs_exclude), claimed=set(),
    )  # fmt: skip
    for rel in found:
        root, inner = attribution.located(store.root, rel, outputs)
        entry = produced.entry(root, inner, store.put_fd, settings.max_output_bytes, as_rel=rel)
        if entry is not None:
            res.outputs.append(entry)
    record.redactions = sorted({*record.redactions, *(f"masked in {m}" for m in masker.masked)})
    store.seal(record, run_dir)
