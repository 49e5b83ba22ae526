"""The optional API a training script may use: metrics, params, output dir, seed.

Standard library only. Outside a repro run the calls are harmless: metrics and
params go nowhere, the output dir is ./outputs, the seed is 0.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from repro.runtime import contract, jsonl

_lock = threading.Lock()
_steps: dict[str, int] = {}
_metrics = jsonl.Appender("metrics")


def _runtime_dir() -> Path | None:
    d = os.environ.get(contract.RUNTIME_DIR_ENV)
    return Path(d) if d and os.environ.get(contract.RUN_ID_ENV) else None


def _rank() -> int:
    return jsonl.rank()  # -1 outside torchrun: metrics and params go to the run's files, as rank 0's


def log_metric(name: str, value: float, step: int | None = None) -> None:
    """Record one value of a metric series (rank 0's series are the run's metrics)."""
    d = _runtime_dir()
    if d is None:
        return
    with _lock:
        if step is None:
            step = _steps.get(name, -1) + 1
        _steps[name] = step
        _metrics.write({"name": str(name), "value": float(value), "step": int(step)})


def log_params(params: dict[str, Any] | None = None, **kwargs: Any) -> None:
    """Record hyper-parameters the script decided itself (merged with earlier calls)."""
    d = _runtime_dir()
    if d is None:
        return
    merged = dict(params or {}, **kwargs)
    path = d / contract.logged_file(contract.PARAMS_FILE, _rank())
    with _lock:
        current = json.loads(path.read_text()) if path.is_file() else {}
        current.update({str(k): v for k, v in merged.items()})
        path.write_text(json.dumps(current, default=str, sort_keys=True))


def output_dir() -> Path:
    """The run's (first) declared output directory, created if needed."""
    root = Path(os.environ.get(contract.PROJECT_ROOT_ENV, "."))
    outputs = [o for o in os.environ.get(contract.OUTPUTS_ENV, "outputs").split(os.pathsep) if o]
    path = root / (outputs[0] if outputs else "outputs")
    path.mkdir(parents=True, exist_ok=True)
    return path


def seed() -> int:
    """This process's seed: the run's master seed (plus the rank in multi-process runs)."""
    try:
        master = int(os.environ.get(contract.SEED_ENV, "0"))
    except ValueError:
        master = 0
    return contract.rank_seed(master, _rank())
