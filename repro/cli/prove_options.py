"""The options of a proof (`--prove`, `--budget`, `--steps`), the same in `repro diff` and `repro check
--against`: each defined once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from repro.errors import UsageError

F = TypeVar("F", bound=Callable[..., Any])


def prove_options(what: str) -> Callable[[F], F]:
    """`--prove`, `--budget N` and `--steps K`, the same in `diff` and `check --against`: re-execute the
    first run with differences taken from the second (``what`` names the two), into ``prove``, ``budget``
    and ``steps``."""
    prove = click.option(
        "--prove",
        is_flag=True,
        help=f"Re-execute {what}, one difference at a time and then in combination, and report which "
        "change the result (README: Proving why two runs differ).",
    )
    budget = click.option(
        "--budget",
        type=click.IntRange(1),
        default=None,
        metavar="N",
        help="With --prove: at most N executions (default: twice the number of swappable differences).",
    )
    steps = click.option(
        "--steps",
        "prove_steps",
        type=click.IntRange(1),
        default=None,
        metavar="K",
        help="With --prove, where both runs saved checkpoints: each experiment replays K optimizer steps "
        "from one they share (default: up to where they first part, plus 10% of the steps, at least 2).",
    )

    def decorate(f: F) -> F:
        return prove(budget(steps(f)))

    return decorate


def check_budget(prove: bool, budget: int | None, steps: int | None = None) -> None:
    """Raises: UsageError: --budget or --steps without --prove."""
    if budget is not None and not prove:
        raise UsageError("--budget bounds the executions of --prove", hint="add --prove")
    if steps is not None and not prove:
        raise UsageError("--steps sets the window of --prove's experiments", hint="add --prove")
