"""`repro diff A B --prove`: which differences made the results differ, answered by experiment.

Each difference the diff found is a factor (`factors`); each experiment re-executes run A with some
factors taken from run B (`repro.rerun.verify`, the replay machinery, with the run to execute given)
and compares its results with A's and with B's; `search` chooses the experiments within the budget.
The experiments are runs of the store, hidden from `repro ls` and `latest` (helper executions), each
record's ``verification`` naming the factors it took and from which run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from repro import window as windows
from repro.backends.base import Event, OnEvent
from repro.compare import reasons
from repro.compare.trace import TraceDivergence
from repro.compare.verdict import CompareOptions, Side, Verdict, compare_runs
from repro.config import Plan
from repro.diff.model import DiffResult
from repro.diff.proof import Experiment, Factor, Proof
from repro.errors import CapsuleInvalid, DataDrift, DataUnavailable, NotFoundError, UsageError
from repro.facts.data import check_data
from repro.facts.determinism import verifiable_mode
from repro.prove import windowing
from repro.prove.factors import RNG, RNG_WHY, find_factors, hybrid
from repro.prove.search import search
from repro.rerun.request import ReplayRequest
from repro.rerun.sides import of_run
from repro.rerun.verify import verify_run
from repro.store import datablobs
from repro.store.record import DataInput
from repro.store.runs import LoadedRun, Store
from repro.units import plural

__all__ = ["default_budget", "prove"]

_SEED_IN_WINDOW = "a window restores the RNG states recorded with its checkpoint: the seed plays no part"


def default_budget(factors: list[Factor]) -> int:
    """Twice the number of factors an experiment can take: each alone, then their combinations."""
    return 2 * sum(1 for f in factors if f.swappable)


def prove(
    diff: DiffResult, a: LoadedRun, b: LoadedRun, store: Store, plan: Plan, on_event: OnEvent,
    budget: int | None = None, steps: int | None = None,
) -> Proof:  # fmt: skip
    """Re-execute A with factors from B until the set that turns A's result into B's is found, or the
    budget (default `default_budget`) is spent. Where both runs have checkpoints, each experiment is a
    windowed replay of ``steps`` optimizer steps from one both share (`windowing`), else a whole run.

    A capsule is imported into the store first. Raises: UsageError, DataDrift, BackendUnavailable:
    as `repro replay` (a run captured in-process, data that cannot be placed, no engine).
    """
    a, b = (store.import_run(run) if run.from_capsule else run for run in (a, b))
    remote = plan.settings.data_remote
    factors = find_factors(diff, a.record, b.record, _at_hand(store, b, remote))
    if not diff.results_differ:
        proof = Proof(budget=default_budget(factors) if budget is None else budget, findings=[])
        proof.notes.append("the results are identical: there is nothing to explain, no experiment was made")
        return proof
    b_trace = chain_trace(store, b)
    window = windowing.choose(a.record, b.record, of_run(a).trace, b_trace, steps)
    factors = [_in_window(f) for f in factors] if window.windowed else factors
    limit = default_budget(factors) if budget is None else budget
    swappable = [f for f in factors if f.swappable]
    _require_a_data(store, a, remote)
    on_event(Event("info", f"proving: {plural(len(swappable), 'factor')} to swap, at most "
                           f"{plural(limit, 'execution')}; {window.describe()}"))  # fmt: skip
    b_side = dataclasses.replace(of_run(b), trace=b_trace)
    execute = _executor(a, (b, b_side), store, plan, on_event, {f.id: f for f in factors}, window)
    proof = search(factors, execute, limit)
    proof.window = window.to_dict()
    mode = verifiable_mode(a.record.determinism, b.record.determinism)
    if mode != "strict":
        proof.compared_by = f"the {mode} mode's tolerance (results within it count as equal)"
    if window.agree:
        logged = " (a resumed run logs what follows its checkpoint)" if b.record.resumed_from else ""
        proof.notes.append(
            f"{window.why}: the runs trained alike; the results differ in what was logged{logged}"
        )
    if not swappable:
        proof.notes.append("no difference between the runs can be swapped by a re-execution here")
    elif not proof.explained and not proof.notes:
        cannot = [f.id for f in factors if not f.swappable]
        rest = (
            f"among the factors that cannot be swapped ({', '.join(cannot)})"
            if cannot
            else "in nondeterminism"
        )
        proof.notes.append(
            f"every swappable factor taken from B together does not give B's result: the rest lies {rest}"
        )
    return proof


def _at_hand(store: Store, run: LoadedRun, remote: str | None) -> Callable[[DataInput], bool]:
    """Whether one of ``run``'s inputs is at hand for an experiment: here as recorded, or every file
    of it kept as a blob (the store, the data remote) that an experiment places."""
    roots = datablobs.blob_roots(None, store.dir, datablobs.remote_root(remote, store.root))

    def at_hand(item: DataInput) -> bool:
        try:
            if all(roots.find(e.hash) is not None for e in item.entries(run.read_blob)):
                return True
        except CapsuleInvalid:  # an unreadable manifest: not kept
            pass
        return not check_data([item], store.root, read_blob=run.read_blob)

    return at_hand


def _require_a_data(store: Store, a: LoadedRun, remote: str | None) -> None:
    """Raises: DataUnavailable: an input of run A is neither here as recorded nor kept: every
    experiment re-executes A, so none could run."""
    at_hand = _at_hand(store, a, remote)
    missing = [item.path for item in a.record.data.inputs if not at_hand(item)]
    if missing:
        raise DataUnavailable(
            f"--prove re-executes run {a.record.id}, and its data {', '.join(missing[:3])} is neither here "
            "as recorded nor kept in the store",
            hint="put run A's data back in the project, then prove again (a file the run reads without "
            "--data is kept in the store up to store.max_input_bytes)",
        )


def _in_window(f: Factor) -> Factor:
    """A factor as a windowed experiment takes it: the seed plays no part, a resume's RNG states do."""
    if f.id == "seed":
        return dataclasses.replace(f, why_not=_SEED_IN_WINDOW)
    if f.id == RNG and f.why_not == RNG_WHY:
        return dataclasses.replace(f, why_not=None)
    return f


def chain_trace(store: Store, run: LoadedRun, depth: int = 0) -> list[dict[str, Any]]:
    """A run's per-step trace as one uninterrupted run's: a resumed run's rows (counted from its resume)
    after those of the runs it continues, placed at the last checkpoint the run before it saved."""
    rows = of_run(run).trace
    if not run.record.resumed_from or depth > 32:
        return rows
    try:
        before = store.load_run(run.record.resumed_from)
    except NotFoundError:
        return rows
    at = max((c.step for c in before.record.results.checkpoints), default=0)
    earlier = [r for r in chain_trace(store, before, depth + 1) if int(r.get("step", 0)) < at]
    return earlier + [{**r, "step": int(r.get("step", 0)) + at} for r in rows]


def _executor(
    a: LoadedRun, b_run: tuple[LoadedRun, Side], store: Store, plan: Plan, on_event: OnEvent,
    factors: dict[str, Factor], window: windowing.Windowing,
) -> Callable[[tuple[str, ...]], Experiment]:  # fmt: skip
    options = CompareOptions.from_settings(plan.settings)
    checkpoint = window.checkpoint
    b, b_side = b_run

    def execute(taken: tuple[str, ...]) -> Experiment:
        told = f"experiment: run {a.record.id} with {', '.join(taken)} from run {b.record.id}"
        on_event(Event("info", told))
        record = hybrid(a.record, b.record, taken)
        said = [{"factor": f, "a": factors[f].to_dict()["a"], "b": factors[f].to_dict()["b"]} for f in taken]
        request = ReplayRequest(
            ref=a.record.id, run=dataclasses.replace(a, record=record),
            env=tuple(f.partition(":")[2] for f in taken if f.startswith("env:")),
            taken={"taken_from": b.record.id, "factors": said, "window": window.to_dict()},
            from_checkpoint=checkpoint.hash if checkpoint is not None else None,
            steps=window.steps if checkpoint is not None else None, spoil=RNG if RNG in taken else "",
        )  # fmt: skip
        started = time.monotonic()
        try:
            outcome = verify_run(request, store, plan, on_event, kind="replay")
        except (DataDrift, DataUnavailable, UsageError) as e:  # this combination cannot run here: said
            return Experiment(run="", factors=list(taken), vs_a="failed", vs_b="failed", error=e.message)
        made = store.load_run(outcome.replay.id)
        mode = verifiable_mode(b.record.determinism, made.record.determinism)
        if checkpoint is not None:
            shown = windows.Window(checkpoint, window.steps)
            vs_b = windows.compare(b_side, of_run(made), shown, mode, None, options)
        else:
            vs_b = compare_runs(b_side, of_run(made), mode, None, options)
        return Experiment(
            run=made.record.id, factors=list(taken), vs_a=outcome.verdict.status, vs_b=vs_b.status,
            divergence=where(outcome.verdict), seconds=time.monotonic() - started,
            op=None if checkpoint is not None else first_op(outcome.verdict),
        )  # fmt: skip

    return execute


def first_op(verdict: Verdict) -> str | None:
    """The first differing op `--ops` found (a run A recorded with ``--ops``), shortly: ``aten::add in
    Net (optimizer step 0)``; None where none was named."""
    found = next((r for r in verdict.reasons if r.code == reasons.Code.OP_DIFFERS), None)
    if found is None:
        return None
    f = found.fields
    module = f" in {f['module']}" if f.get("module") else ""
    return f"{f.get('op')}{module} (optimizer step {f.get('step')})"


def where(verdict: Verdict) -> str | None:
    """Where a result first parts from the one it is compared with: the step and parameter of the
    trace, else the metric and its step, else the verdict's summary; None when it does not."""
    if verdict.reproduced:
        return None
    if verdict.status == "failed":
        return "the run failed"
    trace: TraceDivergence | None = verdict.trace
    if trace is not None:
        return f"step {trace.step} ({trace.param})"
    if verdict.metrics is not None:
        at = f" at step {verdict.metrics.step}" if verdict.metrics.step is not None else ""
        return f"{verdict.metrics.name}{at}"
    return verdict.summary or None
