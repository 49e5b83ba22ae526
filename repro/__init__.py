"""repro: reproducible deep-learning training runs.

The run API below is all a training script needs (README, "The Python API"). Importing it is
cheap and needs only the standard library, so it works inside containers where only the runtime
is mounted, and every call is harmless outside a run:

    import repro
    repro.log_metric("loss", 0.25, step=10)
    repro.log_params(lr=0.1)
    out = repro.output_dir()
    seed = repro.seed()
    repro.checkpoint.save("ckpt.pt", model=model, loader=loader)   # exact mid-epoch resume

Code that cannot be wrapped by `repro run` (a notebook, a service) records a run from inside:

    with repro.capture(data=["data"], outputs=["outputs"]) as run:
        train()

In IPython/Jupyter, `%load_ext repro` adds the `%%repro` cell magic.
"""

from __future__ import annotations

__version__ = "0.1.0"

import os
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from repro.runtime.api import log_metric, log_params, output_dir, seed

if TYPE_CHECKING:
    from repro import checkpoint
    from repro.inprocess import InProcessRun

__all__ = [
    "__version__",
    "capture",
    "checkpoint",
    "load_ipython_extension",
    "log_metric",
    "log_params",
    "output_dir",
    "seed",
]


def capture(
    data: Sequence[str] = (),
    outputs: Sequence[str] = (),
    seed: int | None = None,
    *,
    cells: str | None = None,
    start: str | os.PathLike[str] | None = None,
) -> AbstractContextManager[InProcessRun]:
    """Record the block as one run, from inside the process: `with repro.capture(...) as run:`.

    On entry the code (git state or snapshot), the hashes of the ``data`` paths, the machine and
    the installed packages are recorded, and ``seed`` (drawn when None) is applied to `random`,
    and to NumPy and torch where they are imported. Inside the block `log_metric`, `log_params`
    and the integrations write to the run. On exit the files new or changed in ``outputs`` are
    hashed and stored and the record is sealed (failed if the block raised); ``run.record`` is
    the sealed record and ``run.id`` its id. ``cells``: notebook code run so far, recorded as
    the run's code; ``start``: a directory inside the project (default: the current one).

    Weaker than `repro run`, and the record says so: no container, no determinism knobs, reads
    and writes not watched, and the run cannot be replayed.

    Raises:
        NotFoundError: a declared data path is missing. ConfigError: a bad repro.yaml.
    """
    from repro.inprocess import capture as record_block  # the store and capture modules: on first use

    return record_block(data, outputs, seed, cells=cells, start=start)


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext repro`: register the `%%repro` cell magic (IPython/Jupyter)."""
    from repro.ui import notebook

    notebook.register(ipython)


def __getattr__(name: str) -> Any:
    # `repro.checkpoint` is imported on first use: the command line never needs it.
    if name == "checkpoint":
        import importlib

        return importlib.import_module("repro.checkpoint")
    raise AttributeError(f"module 'repro' has no attribute {name!r}")


def __dir__() -> list[str]:
    # The public API only: not the names this module imports to define it.
    return sorted(__all__)
