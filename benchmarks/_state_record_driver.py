"""Runs a training script (``python _state_record_driver.py OUT script.py args...``) as `python script.py`
would, and writes to OUT the CPU and wall seconds between its optimizer steps (one hook after every
step, the same with and without the state record) and of the whole script."""

from __future__ import annotations

import json
import runpy
import statistics
import sys
import time

from torch.optim.optimizer import register_optimizer_step_post_hook

out, script = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]
periods: list[tuple[float, float]] = []
last: list[tuple[float, float]] = []


def after_step(optimizer: object, args: object, kwargs: object) -> None:
    now = (time.perf_counter(), time.process_time())
    if last:
        periods.append((now[0] - last[0][0], now[1] - last[0][1]))
    last[:] = [now]


register_optimizer_step_post_hook(after_step)
start = time.perf_counter()
runpy.run_path(script, run_name="__main__")
with open(out, "w") as f:
    json.dump(
        {
            "steps": len(periods) + 1,
            "step_wall": statistics.median(w for w, _ in periods),
            "step_cpu": statistics.median(c for _, c in periods),
            "script_wall": time.perf_counter() - start,
        },
        f,
    )
