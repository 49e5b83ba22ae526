"""`repro check`: is a training command reproducible? A gate for CI.

Two questions, one result type:

- **repeat**: run the command N times under repro with one seed and compare run 1 with
  each later run (outputs, metrics, stdout) — the same comparison a replay makes;
- **against**: replay a golden capsule's recorded command against *today's* code (a
  fresh capture of the working tree, stored in the store, restored into a scratch
  directory) and today's data, and compare with the capsule's results.

Core only: returns a `CheckResult`; ``repro.ui.check`` renders it (text, JSON, Markdown,
JUnit) for the CLI and the pytest plugin.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from repro import start
from repro.backends.base import Event, OnEvent
from repro.collect import checkpoints
from repro.compare import ops, resumetrace
from repro.compare import reasons as codes
from repro.compare.reasons import Code
from repro.compare.resumetrace import ResumeCause, ResumeComparison
from repro.compare.verdict import (
    REPRODUCED,
    CompareOptions,
    Known,
    OutputDiff,
    Side,
    Verdict,
    compare_runs,
    exit_code_for,
    explained,
    worst_status,
)
from repro.config import Plan, Settings
from repro.diff import DiffResult, diff_records
from repro.errors import ExitCode, UsageError
from repro.facts import lockvariants
from repro.facts.code import CodeCapture, MaskedPut, capture_code, restore_code, store_patch
from repro.facts.determinism import clock_env, verifiable_mode
from repro.facts.secrets import Redactor, run_masker
from repro.facts.secrets.verdicts import VERDICTS_DB, Verdicts
from repro.integrations import trackers
from repro.rerun.execute import replay_record
from repro.rerun.request import ReplayRequest, resolve_trusted
from repro.rerun.sides import of_run, outputs_only, tolerance, verification
from repro.rerun.verify import verify_run
from repro.run.capture import capture, expand
from repro.run.execute import build_spec
from repro.run.prepared import Prepared, ProgressFactory, RunRequest
from repro.runtime import contract
from repro.store import limits
from repro.store.record import Record
from repro.store.runs import LoadedRun, Store
from repro.store.signing import Trust
from repro.store.statcache import HashCache

DEFAULT_RUNS = 2
KIND: Final = "check"


CheckKind = Literal[
    "repeat", "against", "interrupt"
]  # runs against each other, a capsule, an interrupted run


@dataclass
class CheckResult:
    """What a check found: the runs it made, the verdicts, and (against a capsule) the diff."""

    kind: CheckKind
    mode: str  # the determinism mode the runs used
    records: list[Record] = field(default_factory=list)  # repeat: runs 1..N; against: [capsule, new run]
    verdicts: list[Verdict] = field(default_factory=list)  # run 1 vs run k, or capsule vs new run
    seed: int | None = None
    failed: Record | None = None  # a run whose command did not succeed (the check stopped there)
    diff: DiffResult | None = None  # against: the capsule's record vs the new run's record
    capsule: str | None = None  # against: the capsule ref as given
    notes: list[str] = field(default_factory=list)
    causes: list[ResumeCause] = field(default_factory=list)  # interrupt: what a resume did not restore
    controls: list[dict[str, Any]] = field(default_factory=list)  # interrupt --control: each spoiled resume
    states: list[ResumeComparison] = field(default_factory=list)  # interrupt: each resume, per rank

    @property
    def status(self) -> str:
        """identical | within_tolerance | diverged | failed."""
        if self.failed is not None:
            return "failed"
        return worst_status(self.verdicts)

    @property
    def reproduced(self) -> bool:
        return self.status in REPRODUCED

    @property
    def exit_code(self) -> ExitCode:
        return exit_code_for(self.status)

    def differing_outputs(self) -> list[str]:
        """Paths of the outputs that make a verdict fail, in order, without repeats."""
        seen: dict[str, None] = {}
        for v in self.verdicts:
            for o in v.outputs:
                if output_fails(v, o):
                    seen.setdefault(o.path, None)
        return list(seen)


# --------------------------------------------------------------------------- repeat


def run_check(
    request: RunRequest,
    store: Store,
    plan: Plan,
    on_event: OnEvent,
    *,
    runs: int = DEFAULT_RUNS,
    atol: float | None = None,
    rtol: float | None = None,
    on_record: Callable[[Record], None] | None = None,
    progress: ProgressFactory | None = None,
) -> CheckResult:
    """Run ``request`` ``runs`` times with one seed and compare run 1 with each later run.

    The seed is the plan's, else drawn by run 1 and reused.
    A run whose command fails stops the check (``CheckResult.failed``).

    Raises:
        UsageError: fewer than two runs, no command, a cwd outside the project.
        BackendUnavailable, BuildError: the backend cannot run the command.
    """
    if runs < 2:
        raise UsageError(
            f"--runs {runs}: a check compares at least two runs", hint="repro check --runs 2 -- CMD"
        )
    requests = expand(request, plan)
    if len(requests) > 1:
        raise UsageError(
            "a Hydra multirun is several runs; a check repeats one command",
            hint="check one job: drop -m and give each override one value",
        )
    request = requests[0]  # a Hydra app writes into the same directory in every run
    result = CheckResult(kind="repeat", mode=plan.mode, seed=plan.settings.seed)
    options = CompareOptions.from_settings(plan.settings)
    where = start.Start.from_settings(plan.settings)  # chosen by run 1, kept for the others
    first: Side | None = None
    first_ops: dict[int, list[dict[str, Any]]] = {}

    def judge(run: LoadedRun) -> None:
        """Compare a later run with run 1 before it is sealed, so its record carries the verdict."""
        if first is None or run.record.results.status != "succeeded":
            return
        mode = verifiable_mode(result.records[0].determinism, run.record.determinism)
        verdict = compare_runs(first, of_run(run), mode, tolerance(mode, atol, rtol), options)
        if plan.settings.ops and verdict.status != "identical":  # --ops: the first differing op
            ours = ops.streams(run.record.results.logs, run.read_blob)
            ops.explain(verdict, first_ops, ours, plan.settings.ops_steps, "run 1's", "this run's")
        run.record.verification = verification(verdict, result.records[0].id)
        result.verdicts.append(verdict)

    def prepare(prepared: Prepared) -> None:
        prepared.record.kind = KIND
        if result.records:
            prepared.record.parent = result.records[0].id
            _same_clock(prepared, result.records[0])

    for i in range(runs):
        record = start.run(
            request, plan, store, on_event, start=where, prepare=prepare, progress=progress,
            head=f"check run {i + 1}/{runs}:", before_seal=judge,
        )  # fmt: skip
        record = _record_run(result, record, on_record)
        result.seed = record.seeds.master
        result.mode = verifiable_mode(*(r.determinism for r in result.records))
        plan = plan.with_seed(record.seeds.master)
        if result.failed is not None:
            return result
        if first is None:
            loaded = store.load_run(record.id)
            first, first_ops = of_run(loaded), ops.streams(record.results.logs, loaded.read_blob)
    trackers.report_verdict(result.records, result.status, store.root, lambda s: on_event(Event("info", s)))
    return result


def _same_clock(prepared: Prepared, first: Record) -> None:
    """A later run writes the dates the first run wrote (SOURCE_DATE_EPOCH), as a replay of it would."""
    prepared.record.determinism.source_date_epoch = first.determinism.source_date_epoch
    prepared.spec.env.update(clock_env(first.determinism.source_date_epoch))


# --------------------------------------------------------------------------- interrupt

TRACE_ENV = {contract.RESUME_TRACE_ENV: "1"}


def run_interrupt_check(
    request: RunRequest,
    store: Store,
    plan: Plan,
    on_event: OnEvent,
    *,
    interrupts: int,
    control: bool = False,
    rng: random.Random | None = None,
    on_record: Callable[[Record], None] | None = None,
) -> CheckResult:
    """Run the command uninterrupted, then ``interrupts`` times SIGKILLed at a random point after a
    checkpoint and continued with `repro resume`; compare each resumed run's outputs with the
    uninterrupted run's. Every run executes in a scratch copy of the recorded code, so no
    checkpoint of one run is seen by another. A resume that diverged is explained from the
    resume trace: the first step and what was not restored (``CheckResult.causes``); the
    check stops there. With ``control``, once every resume was identical, one more run is
    killed and resumed with its RNG states deliberately not restored (`runtime/spoil.py`), and,
    where the run has a distributed sampler, one more with its samplers' epoch reset
    (`runtime/statewatch.py`): each must differ, else the check fails (`control_not_caught`).
    Every resumed run's state is compared with the uninterrupted run's, per rank
    (``CheckResult.states``).

    Raises:
        UsageError: no command; a command that saves no checkpoint before its last step.
        BackendUnavailable, BuildError: the backend cannot run the command.
    """
    prepared = capture(request, plan, store, on_event)
    first = prepared.record
    first.kind = KIND
    where = start.Start.from_settings(plan.settings)  # chosen by the uninterrupted run, kept for the others
    result = CheckResult(kind="interrupt", mode=first.determinism.mode, seed=first.seeds.master)
    scratch_dirs = [_scratch_copy(store, first)]
    try:
        prepared.spec.project_root, prepared.spec.data_root = scratch_dirs[0], store.root
        prepared.spec.env.update(TRACE_ENV)
        prepared.outputs_before, prepared.tree_before = {}, None
        head = f"check --interrupt: uninterrupted run {first.id}"
        first = _record_run(result, start.execute(prepared, where, store, on_event, head=head), on_record)
        if result.failed is not None:
            return result
        reference = _resume_traces(store, first)
        total = len(reference.get(0, []))
        saved = [c.step for c in first.results.checkpoints]
        rng = rng or random.Random()
        steps = resumetrace.kill_steps(saved, total, interrupts, first.command.nproc_per_node, rng)
        if not steps:
            raise UsageError(
                f"{' '.join(first.command.argv)} saved no checkpoint before its last optimizer step "
                f"({total} steps): there is no point to interrupt it at",
                hint="save a checkpoint during training (torch.save every epoch) and load it when present",
            )
        attempt = _Attempts(result, first, reference, store, plan, where, on_event, on_record)
        for step in steps:
            scratch_dirs.append(_scratch_copy(store, first))
            verdict = attempt.run(step, scratch_dirs[-1])
            if verdict is None:
                return result
            result.verdicts.append(verdict)
            if not verdict.reproduced:
                result.notes.append(
                    f"stopped after resume {len(result.verdicts)} of {len(steps)}: it diverged"
                )
                break
        if control and len(result.verdicts) == len(steps) and result.reproduced:

            def scratch() -> Path:
                scratch_dirs.append(_scratch_copy(store, first))
                return scratch_dirs[-1]

            _controls(attempt, rng.choice(steps), scratch)
    finally:
        for d in scratch_dirs:
            shutil.rmtree(d, ignore_errors=True)
    return result


def _record_run(result: CheckResult, record: Record, on_record: Callable[[Record], None] | None) -> Record:
    result.records.append(record)
    result.notes += [w.message for w in record.warnings if w.message not in result.notes]
    if on_record is not None:
        on_record(record)
    if record.results.status != "succeeded":
        result.failed = record
    return record


@dataclass
class _Attempts:
    """What every interrupted attempt of one check shares."""

    result: CheckResult
    first: Record  # the uninterrupted run
    reference: dict[int, list[dict[str, Any]]]  # its resume trace, by rank
    store: Store
    plan: Plan
    where: start.Start  # the backend the uninterrupted run chose
    on_event: OnEvent
    on_record: Callable[[Record], None] | None

    def run(self, step: int, scratch: Path, spoiled: str = "") -> Verdict | None:
        """Kill a run after optimizer step ``step``, resume it (with ``spoiled``: a control, its
        restore of that state spoiled), compare. None when a run failed."""
        from repro.resume import resume

        killed = self._killed(step, scratch)
        self.result.records.append(killed)
        if killed.results.status == "succeeded":
            self.result.notes.append(
                f"run {killed.id} ended before optimizer step {step}: nothing was interrupted"
            )
        backend = self.where.chosen.name if self.where.chosen is not None else None
        env = {**TRACE_ENV, contract.RESUME_CONTROL_ENV: spoiled} if spoiled else TRACE_ENV
        resumed = resume(self.store, killed.id, self.plan, self.on_event, backend=backend,
                         env=env, root=scratch)  # fmt: skip
        _record_run(self.result, resumed, self.on_record)
        if self.result.failed is not None:
            return None
        ranks = resumetrace.compare_ranks(self.reference, _resume_traces(self.store, resumed))
        self.result.states.append(ResumeComparison(resumed.id, step, spoiled, ranks))
        original, again = (outputs_only(of_run(self.store.load_run(r.id))) for r in (self.first, resumed))
        known = Known(started_over=_started_over(resumed) if resumed.results.resume_started_over else None)
        options = CompareOptions.from_settings(self.plan.settings)
        verdict = compare_runs(original, again, self.result.mode, options=options, known=known)
        verdict.notes.append(f"killed after optimizer step {step}, resumed as {resumed.id}")
        verdict.notes.append(
            "a resumed run logs only what follows its checkpoint: outputs compared, not logs"
        )
        if not verdict.reproduced and not spoiled:
            self._explain(verdict, resumed)
        return verdict

    def _killed(self, step: int, scratch: Path) -> Record:
        first, store = self.first, self.store
        record = replay_record(first, self.plan.settings)
        record.kind, record.parent = KIND, first.id
        run_dir = store.begin_run(record.id, record.command.argv)
        data = [i.path for i in first.data.inputs]
        lock = start.restore_lockfile(first, store.read_blob, run_dir)
        outputs, argv = list(first.results.output_roots), first.command.executed()
        spec = build_spec(record, scratch, run_dir, data, outputs, argv, data_root=store.root)
        spec.env.update({**TRACE_ENV, contract.INTERRUPT_AT_STEP_ENV: str(step)})
        prepared = Prepared(record, spec, run_dir, {}, self.plan.settings, lockfile=lock)
        head = f"check --interrupt: {record.id} is killed after optimizer step {step}"
        return start.execute(prepared, self.where, store, self.on_event, head=head)

    def _explain(self, verdict: Verdict, resumed: Record) -> None:
        rows = _resume_traces(self.store, resumed)
        causes = [resumetrace.first_cause(self.reference.get(r, []), rows[r], r) for r in sorted(rows)]
        found = sorted((c for c in causes if c is not None), key=lambda c: (c.step, c.rank))
        if found:
            self.result.causes.append(found[0])
            cause = found[0]
            fields = {"step": cause.step, "rank": cause.rank, "cause": cause.cause, "field": cause.field}
            explained(verdict, codes.Reason(Code.NOT_RESTORED, cause.describe(), fields=fields), first=True)


CONTROL_SPOILS = {
    "rng": "its RNG states not restored (every stream of every rank, the script's own restores ignored)",
    "sampler": "its samplers' epoch reset (every DistributedSampler.set_epoch ignored, on every rank)",
}


def _controls(attempt: _Attempts, step: int, scratch: Callable[[], Path]) -> None:
    """The negative controls: the RNG one always; where the run has a distributed sampler, the
    sampler-epoch one too. Each spoiled resume must be reported as not exact."""
    spoils = ["rng"]
    if any(row.get("sampler") for rows in attempt.reference.values() for row in rows):
        spoils.append("sampler")
    for spoiled in spoils:
        if not _control(attempt, step, scratch(), spoiled):
            return


def _control(attempt: _Attempts, step: int, scratch: Path, spoiled: str) -> bool:
    """One spoiled resume, which must differ; False when a run of it failed."""
    verdict = attempt.run(step, scratch, spoiled=spoiled)
    result = attempt.result
    if verdict is None:
        return False
    resumed = result.records[-1].id
    firsts = [r.first for r in result.states[-1].ranks if r.first is not None] if result.states else []
    state = min(firsts, key=lambda c: (c.step, c.rank)).named() if firsts else ""
    entry = {"spoiled": spoiled, "run": resumed, "step": step, "state": state}
    if not verdict.reproduced:
        first = verdict.reasons[0].message if verdict.reasons else verdict.summary
        result.controls.append({**entry, "caught": True, "by": first})
        return True
    text = (
        f"control not caught: resume {resumed}, {CONTROL_SPOILS[spoiled]}, ended identical — this check "
        "cannot detect a broken resume in this script: its outputs are not sensitive to that state"
    )
    result.controls.append({**entry, "caught": False, "by": ""})
    verdict.status = "diverged"
    explained(verdict, codes.Reason(Code.CONTROL_NOT_CAUGHT, text, fields={"spoiled": spoiled}), first=True)
    result.verdicts.append(verdict)
    return True


def _started_over(resumed: Record) -> codes.Reason:
    """A resumed run that loaded no checkpoint tested no resume: the check fails, saying why."""
    text = checkpoints.started_over(resumed.resumed_from or "the killed run")
    fields = {"resumed": resumed.id, "original": resumed.resumed_from}
    return codes.Reason(Code.RESUME_STARTED_OVER, text, fields=fields)


def _resume_traces(store: Store, record: Record) -> dict[int, list[dict[str, Any]]]:
    loaded = store.load_run(record.id)
    traces: dict[int, list[dict[str, Any]]] = {}
    stream = contract.STREAMS["rtrace"]
    for name, blob in record.results.logs.items():
        rank = stream.log_rank(name)
        if rank is not None and stream.log_name(rank) == name:  # each rank's, as collected
            text, _ = limits.stream_head(loaded.read_blob(blob), limits.MAX_RESUME_TRACE_BYTES)
            traces[rank] = resumetrace.parse(text)  # a trace cut there compares its steps before
    return traces


def _scratch_copy(store: Store, record: Record) -> Path:
    """A directory holding the record's code, where one run of the check executes."""
    scratch = Path(tempfile.mkdtemp(prefix="repro-interrupt-"))  # outside the project: not its git tree
    restore_code(record.code, store.blob_path, scratch)
    for entry in record.code.listed:  # untracked files that are not code: the run may read them
        source, target = store.root / entry.path, scratch / entry.path
        if source.is_file() and not source.is_symlink() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    (scratch / record.command.cwd).mkdir(parents=True, exist_ok=True)
    return scratch


# --------------------------------------------------------------------------- against


@dataclass
class AgainstRequest:
    """Replay a golden capsule against the current code."""

    capsule: str
    data_root: Path | None = None
    allow_data_drift: bool = False
    atol: float | None = None
    rtol: float | None = None
    trust: Trust | None = None  # the golden capsule's signature, checked before it is extracted
    env: tuple[str, ...] = ()  # recorded variables to set again beyond the safe set (`--env NAME`)


def capture_current_code(
    store: Store, settings: Settings, original: Record, extra_exclude: Sequence[str] = ()
) -> CodeCapture:
    """A fresh capture of the working tree's code, its files stored; data and outputs left out.

    Raises:
        UsageError: git fails to read the repository.
    """
    exclude = [i.path for i in original.data.inputs] + list(settings.data)
    exclude += list(original.results.output_roots or settings.outputs) + [
        lockvariants.LOCK_DIR,
        *extra_exclude,
    ]
    store.ensure()
    with HashCache(store.cache_dir / "hashes.sqlite") as cache:
        limit = settings.max_code_file_bytes
        masker = run_masker(dict(os.environ), [], [], Redactor(settings.secret_patterns))
        with Verdicts(store.cache_dir / VERDICTS_DB, settings.secret_patterns) as verdicts:
            put = MaskedPut(store, masker, store.root, verdicts)
            code = capture_code(
                store.root, put, exclude=exclude, cache=cache, max_file_bytes=limit,
                earlier_writers=store.earlier_writers, credential=put.credential,
            )  # fmt: skip
    code.patch = masker.text(code.patch, "the uncommitted patch", printed=False)
    store_patch(code, store.put_bytes)
    return code


def run_against(request: AgainstRequest, store: Store, plan: Plan, on_event: OnEvent) -> CheckResult:
    """Replay the capsule's command on today's code and data; compare with the capsule's results.

    The working tree is only read: its files go to the store and the run executes in a
    scratch directory restored from there.

    Raises:
        NotFoundError: no such capsule or run. CapsuleInvalid: a corrupt capsule, or one whose
            signature fails ``request.trust``.
        DataDrift: the recorded data changed (unless allowed).
        UsageError, BackendUnavailable: as `repro replay`.
    """
    loaded = resolve_trusted(store, request.capsule, request.trust, on_event)
    if loaded.from_capsule:
        loaded = store.import_run(loaded)
    original = loaded.record
    inside = _inside(Path(request.capsule), store.root)
    current = capture_current_code(store, plan.settings, original, [inside] if inside else [])
    outcome = verify_run(
        ReplayRequest(
            ref=original.id, data_root=request.data_root, allow_data_drift=request.allow_data_drift,
            atol=request.atol, rtol=request.rtol, env=request.env,
            ops=plan.settings.ops_steps if plan.settings.ops else None,
        ),
        store, plan, on_event, code=current.info, kind=KIND,
    )  # fmt: skip
    new = outcome.replay
    replayed = store.load_run(new.id)
    result = CheckResult(
        kind="against",
        mode=outcome.verdict.mode,
        records=[original, new],
        verdicts=[outcome.verdict],
        seed=new.seeds.master,
        capsule=request.capsule,
        notes=[w.message for w in current.warnings] + list(outcome.notes),
        diff=diff_records(
            original,
            new,
            replayed.read_blob,
            open_blob=_kept(replayed),
            options=CompareOptions.from_settings(plan.settings),
        ),  # fmt: skip
    )
    if new.results.status != "succeeded":
        result.failed = new
    return result


def _kept(run: LoadedRun) -> Callable[[str], Path | None]:
    def open_blob(digest: str) -> Path | None:
        path = run.blob_path(digest)
        return path if path.is_file() else None

    return open_blob


def _inside(path: Path, root: Path) -> str | None:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


# --------------------------------------------------------------------------- decisions


def output_fails(v: Verdict, o: OutputDiff) -> bool:
    """Whether this output makes the verdict fail (strict: any change; else: over tolerance)."""
    if o.status == "same":
        return False
    return v.mode == "strict" or not o.within_tolerance
