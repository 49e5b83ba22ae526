"""repro: reproducible deep-learning training runs.

Importing this package is cheap and needs only the standard library, so the
optional run API works inside containers where only the runtime is mounted:

    import repro
    repro.log_metric("loss", 0.25, step=10)
    repro.log_params(lr=0.1)
    out = repro.output_dir()
    seed = repro.seed()
    repro.checkpoint.save("ckpt.pt", model=model, loader=loader)   # exact mid-epoch resume
"""

from __future__ import annotations

__version__ = "0.1.0"

from repro import checkpoint  # noqa: E402
from repro.runtime.api import log_metric, log_params, output_dir, seed  # noqa: E402

__all__ = ["__version__", "checkpoint", "log_metric", "log_params", "output_dir", "seed"]
