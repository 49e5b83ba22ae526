"""repro: reproducible deep-learning training runs.

Importing this package is cheap and needs only the standard library, so the
optional run API works inside containers where only the runtime is mounted:

    import repro
    repro.log_metric("loss", 0.25, step=10)
    repro.log_params(lr=0.1)
    out = repro.output_dir()
    seed = repro.seed()
    repro.checkpoint.save("ckpt.pt", model=model, loader=loader)   # exact mid-epoch resume

Code that cannot be wrapped by `repro run` (a notebook, a service) records a run from inside:

    with repro.capture(data=["data"], outputs=["outputs"]):
        train()

In IPython/Jupyter, `%load_ext repro` adds the `%%repro` cell magic.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

from repro import checkpoint  # noqa: E402
from repro.runtime.api import log_metric, log_params, output_dir, seed  # noqa: E402

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


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext repro`: register the `%%repro` cell magic (IPython/Jupyter)."""
    importlib.import_module("repro.integrations.notebook").register(ipython)


def __getattr__(name: str) -> Any:
    # `repro.capture` is the package of capture modules, made callable (`with repro.capture(...):`);
    # imported on first use so `import repro` stays light.
    if name == "capture":
        return importlib.import_module("repro.capture")
    raise AttributeError(f"module 'repro' has no attribute {name!r}")
