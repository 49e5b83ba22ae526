"""Which factors turn run A's result into run B's, found by experiment (delta debugging), within a
budget of executions. Pure: the executions are a callback, so the rule is tested without training.

The order: each swappable factor alone (which ones change A's result at all); then, unless one alone
gives B's result, the factors that changed it together, else every swappable factor together; a set
that gives B's result is then made smaller one factor at a time (those without effect alone first),
keeping each removal that still gives B's result. Every combination executes once (strict mode: one
execution is the answer), and no combination twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from repro.diff.proof import Experiment, Factor, Finding, Proof
from repro.units import plural

Execute = Callable[[tuple[str, ...]], Experiment]


class _Budget:
    """The executions made so far, by the set of factors taken, up to ``limit``."""

    def __init__(self, execute: Execute, limit: int) -> None:
        self.execute, self.limit = execute, limit
        self.made: dict[frozenset[str], Experiment] = {}
        self.order: list[Experiment] = []
        self.ran_out = False

    def run(self, taken: Sequence[str]) -> Experiment | None:
        """The experiment taking ``taken`` from B (made now, or earlier); None past the budget."""
        key = frozenset(taken)
        if key in self.made:
            return self.made[key]
        if len(self.order) >= self.limit:
            self.ran_out = True
            return None
        done = self.execute(tuple(taken))
        self.made[key] = done
        self.order.append(done)
        return done

    def alone(self, factor: str) -> Experiment | None:
        return self.made.get(frozenset([factor]))


def search(factors: list[Factor], execute: Execute, budget: int) -> Proof:
    """Find by experiment the effect of each factor and the smallest set giving B's result."""
    proof = Proof(budget=budget)
    ids = [f.id for f in factors if f.swappable]
    made = _Budget(execute, budget)
    for factor in ids:
        made.run([factor])
    ids = [f for f in ids if (e := made.alone(f)) is None or e.error is None]  # one that cannot run: out
    found = _first_set(ids, made)
    if found is not None:
        found = _smaller(found, ids, made)
    proof.experiments = made.order
    proof.explained = found is not None
    proof.proved = found or []
    proof.findings = [_finding(f, made, proof.proved) for f in factors]
    proof.untested = [f.factor.id for f in proof.findings if f.effect == "not_tested"]
    if made.ran_out:
        proof.notes.append(
            f"the budget of {plural(budget, 'execution')} ran out: "
            + ("the set found may not be the smallest" if found else "no set giving B's result was found yet")
            + " (--budget N allows more)"
        )
    return proof


def _first_set(ids: list[str], made: _Budget) -> list[str] | None:
    """A set of factors whose experiment gives B's result: one alone, else those that changed A's
    result alone, else all."""
    for factor in ids:
        alone = made.alone(factor)
        if alone is not None and alone.like_b:
            return [factor]
    changing = [f for f in ids if (e := made.alone(f)) is not None and not e.like_a]
    for candidate in (changing, ids):
        if len(candidate) < 2:
            continue
        tried = made.run(candidate)
        if tried is not None and tried.like_b:
            return candidate
    return None


def _smaller(found: list[str], ids: list[str], made: _Budget) -> list[str]:
    """``found`` without each factor whose removal still gives B's result (no effect alone tried first)."""

    def changed_alone(f: str) -> bool:
        e = made.alone(f)
        return e is not None and not e.like_a

    for factor in sorted(found, key=changed_alone):
        rest = [f for f in found if f != factor]
        if not rest:
            break
        tried = made.run(rest)
        if tried is None:
            break
        if tried.like_b:
            found = rest
    return [f for f in ids if f in found]


def _finding(factor: Factor, made: _Budget, proved: list[str]) -> Finding:
    if not factor.swappable:
        return Finding(factor, "cannot_swap")
    alone = made.alone(factor.id)
    if alone is None:
        return Finding(factor, "not_tested")
    if alone.error is not None:
        return Finding(
            dataclasses.replace(factor, why_not=f"its experiment cannot run: {alone.error}"), "cannot_swap"
        )
    if not alone.like_a:
        return Finding(factor, "changes_result", divergence=alone.divergence, op=alone.op)
    if factor.id in proved:
        return Finding(factor, "only_together", together_with=[f for f in proved if f != factor.id])
    return Finding(factor, "no_effect")
