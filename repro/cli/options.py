"""Options shared by several commands, each defined once (as pip-tools keeps them in scripts/options.py)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from repro.config import BACKENDS, ISAS, MODES, Flags

F = TypeVar("F", bound=Callable[..., Any])

_FLAG_FIELDS = tuple(Flags.__dataclass_fields__)


def execution_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared execution options; the command receives them as `flags: Flags`."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["flags"] = Flags(**{name: kwargs.pop(name) for name in _FLAG_FIELDS})
        return f(*args, **kwargs)

    for option in reversed(
        [
            click.option(
                "--backend",
                type=click.Choice(BACKENDS),
                default=None,
                help="Where to execute (auto: docker when an engine answers, else local).",
            ),
            click.option("--seed", type=int, default=None, help="Master seed (default: drawn and recorded)."),
            click.option(
                "--mode",
                type=click.Choice(MODES),
                default=None,
                help="Determinism: strict (CPU, bit-for-bit; default), gpu (near-exact), off.",
            ),
            click.option(
                "--data",
                "data",
                multiple=True,
                metavar="PATH",
                help="Declared input data (repeatable); hashed and checked on replay.",
            ),
            click.option(
                "--outputs",
                "outputs",
                multiple=True,
                metavar="DIR",
                help="Output directory (repeatable; default: outputs).",
            ),
            click.option(
                "--threads", type=int, default=None, help="Intra-op threads in strict/gpu mode (1)."
            ),
            click.option(
                "--isa",
                type=click.Choice(ISAS),
                default=None,
                help="CPU kernel ISA pin for strict replay across hosts (auto: avx2 when present).",
            ),
            click.option(
                "--nproc-per-node",
                type=click.IntRange(1),
                default=None,
                help="Launch N processes through torchrun --standalone (default 1).",
            ),
            click.option(
                "--gpus", default=None, metavar="all|N", help="GPUs to give the run (exit 3 if none)."
            ),
            click.option(
                "--network/--no-network",
                default=None,
                help="Allow network access inside the container (default: none; recorded).",
            ),
            click.option(
                "--trace/--no-trace",
                default=None,
                help="Record each parameter's fingerprint after every optimizer step, so a replay "
                "names the first step and parameter that diverged.",
            ),
        ]
    ):
        wrapper = option(wrapper)
    return wrapper


replay_backend = click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default=None,
    help="Execute on this backend instead of the recorded one (also REPRO_BACKEND; reported in the verdict).",
)
data_root = click.option(
    "--data-root",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="Directory the recorded data paths are relative to (default: the project root).",
)
allow_data_drift = click.option(
    "--allow-data-drift", is_flag=True, help="Go on even when the data differs from the record."
)
atol = click.option(
    "--atol",
    type=float,
    default=None,
    help="Absolute tolerance for gpu/off modes (defaults: gpu 1e-6, off 1e-4; strict is exact).",
)
rtol = click.option(
    "--rtol",
    type=float,
    default=None,
    help="Relative tolerance for gpu/off modes (defaults: gpu 1e-5, off 1e-3).",
)


def replay_options(f: F) -> F:
    """The options of a replay: --data-root, --allow-data-drift, --atol, --rtol (replay, check --against)."""
    for option in (rtol, atol, allow_data_drift, data_root):
        f = option(f)
    return f
