"""`repro run --trace` per optimizer step: an MLP, a CNN, and one figure at 100M parameters.

    python benchmarks/bench_trace.py

In one process, with strict mode's switches (one thread, deterministic algorithms): the same
training step timed without and with the runtime's trace hook (repro/runtime/steptrace.py, as
`--trace` installs it), installed and removed between blocks of steps, interleaved A B A B.
The median over blocks of each block's mean step (a block is a multiple of the trace's
`SUM_EVERY` steps, so its steps with sums count as often as in a run); each traced block's first
step, where the hook names the parameters once per run (a walk over the process's objects), is
left out. The 100M-parameter figure is
`SUM_EVERY` steps of a wide MLP (CPU): the trace's milliseconds per step, on top of that step.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import INFO, Row, Sample, log, print_rows, scratch


def _models(torch: Any) -> dict[str, tuple[Any, Callable[[], Any], bool]]:
    """name: (model, batch, SGD rather than Adam)."""
    nn = torch.nn
    mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    layers = [m for _ in range(4) for m in (nn.Linear(256, 256), nn.ReLU())]
    small = nn.Sequential(*layers, nn.Linear(256, 10))
    cnn = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 128), nn.ReLU(), nn.Linear(128, 10),
    )  # fmt: skip
    return {
        "MLP 4x256, SGD": (small, lambda: (torch.randn(64, 256), torch.randint(0, 10, (64,))), True),
        "MLP": (mlp, lambda: (torch.randn(64, 784), torch.randint(0, 10, (64,))), False),
        "CNN": (cnn, lambda: (torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))), False),
    }


def _step_times(
    torch: Any, model: Any, batch: Callable[[], Any], steps: int, sgd: bool = False
) -> list[tuple[float, float]]:
    """(wall, CPU seconds of the process) of each step."""
    params = model.parameters()
    optimizer = torch.optim.SGD(params, lr=1e-3) if sgd else torch.optim.Adam(params, lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = batch()
    times = []
    for _ in range(steps):
        t, cpu = time.perf_counter(), time.process_time()
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
        times.append((time.perf_counter() - t, time.process_time() - cpu))
    return times


def _compare(
    torch: Any, model: Any, batch: Callable[[], Any], trace: Path, blocks: int, steps: int,
    warm: int = 5, sgd: bool = False,
) -> Row:  # fmt: skip
    from repro.runtime import steptrace

    plain: list[tuple[float, float]] = []
    traced: list[tuple[float, float]] = []
    _step_times(torch, model, batch, warm, sgd)
    for _ in range(blocks):
        plain.append(_mean(_step_times(torch, model, batch, steps, sgd)))
        handle = steptrace.install(torch, trace)
        traced.append(_mean(_step_times(torch, model, batch, steps + 1, sgd)[1:]))  # the first names them
        handle.remove()
    steptrace.flush()
    return _row(plain, traced)


def _mean(times: list[tuple[float, float]]) -> tuple[float, float]:
    """A block's mean step: (wall, CPU seconds)."""
    return statistics.fmean(w for w, _ in times), statistics.fmean(c for _, c in times)


def _float64_sums(torch: Any, tensors: list[Any]) -> list[list[float]]:
    """The fingerprint `--trace` took before: each parameter's sum and sum of |x| in float64."""
    import numpy as np

    out = []
    for x in tensors:
        a = x.detach().numpy()
        out.append([float(a.sum(dtype=np.float64)), float(np.abs(a).sum(dtype=np.float64))])
    return out


def _fingerprint_row(torch: Any, model: Any, n: int) -> Row:
    """The fingerprint alone, this repro's against the float64 sums it replaced, interleaved."""
    from repro.runtime import steptrace

    tensors = list(model.parameters())
    views = steptrace.Views()  # as the hook keeps them from step to step
    now_fn = lambda torch, tensors: steptrace.fingerprints(torch, tensors, views)  # noqa: E731
    before: list[tuple[float, float]] = []
    now: list[tuple[float, float]] = []
    for _ in range(n):
        for f, out in ((_float64_sums, before), (now_fn, now)):
            t, cpu = time.perf_counter(), time.process_time()
            f(torch, tensors)
            out.append((time.perf_counter() - t, time.process_time() - cpu))
    row = _row(before, now)
    row.case, row.peer = "the fingerprint alone, MLP 4x256", "float64 sum and |x| sum"
    row.target, row.threshold = INFO, 0.0
    row.note = (
        f"per-step medians, interleaved: {row.peer_s.cpu * 1e6:.0f} us before, "
        f"{row.repro_s.cpu * 1e6:.0f} us now (CPU); both change with a one-ulp change of any weight"
    )
    return row


def _row(plain: list[tuple[float, float]], traced: list[tuple[float, float]]) -> Row:
    """Judged by CPU time: on a loaded machine a step's wall time is mostly whether it was preempted."""

    def sample(values: list[tuple[float, float]]) -> Sample:
        s = Sample()
        s.wall = statistics.median(w for w, _ in values)
        s.cpu = statistics.median(c for _, c in values)
        s.runs = [w for w, _ in values]
        return s

    row = Row("", "strict, no --trace", sample(plain), sample(traced), "<= 1.10x", "within", 1.10)
    row.judge_cpu = True
    return row


def run(repeats: int = 3) -> list[Row]:
    import torch

    torch.set_num_threads(1)  # strict mode's switches
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    from repro.runtime.steptrace import SUM_EVERY

    every = SUM_EVERY  # per block a multiple of it; 4 x repeats blocks each way
    steps = -(-int(os.environ.get("REPRO_BENCH_TRACE_STEPS", "16")) // every) * every
    rows = []
    with scratch("repro-bench-trace-") as d:
        for name, (model, batch, sgd) in _models(torch).items():
            params = sum(p.numel() for p in model.parameters())
            # the small MLP: blocks of 64 steps, the hook's steady state as a run has it (it installs
            # the hook once), not its first steps after each install
            block = max(steps, 8 * every) if sgd else steps
            log(f"{name}: {params / 1e6:.2f}M parameters, {4 * repeats} blocks of {block} steps each way")
            row = _compare(torch, model, batch, d / "trace.jsonl", 4 * repeats, block, sgd=sgd)
            row.case = f"--trace per step, {name} ({params / 1e6:.2f}M parameters)"
            row.note = "median of interleaved blocks' mean step, one process, 1 thread; judged by CPU time"
            row.unmet = (
                "every parameter is read once a step (the floor for seeing any changed bit):"
                " NumPy's reduction of the freshly written weights alone costs about 1.05x on"
                " the 4x256 MLP; a digest with prefetching (xxh3 measured 1.02x) would meet it,"
                " but the runtime is limited to the standard library and NumPy"
            )
            rows.append(row)
            if sgd:
                rows.append(_fingerprint_row(torch, model, 4 * repeats * steps))
        big = int(os.environ.get("REPRO_BENCH_TRACE_BIG", "100000000"))
        width = 5000
        depth = max(big // (width * width), 1)
        model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(depth)])
        params = sum(p.numel() for p in model.parameters())
        log(f"{params / 1e6:.0f}M parameters, a few steps each way")
        torch.set_num_threads(os.cpu_count() or 1)
        wide = lambda: (torch.randn(8, width), torch.randint(0, 10, (8,)))  # noqa: E731
        row = _compare(torch, model, wide, d / "big.jsonl", 1, every)
        extra = (row.repro_s.cpu - row.peer_s.cpu) * 1000 if row.repro_s and row.peer_s else float("nan")
        row.case = f"--trace per step, {params / 1e6:.0f}M-parameter MLP (CPU, SGD, batch 8)"
        row.target, row.threshold = INFO, 0.0
        row.note = f"the trace adds {extra:.0f} ms per step (a mean over {every}, one with sums); all cores"
        rows.append(row)
    return rows


if __name__ == "__main__":
    print_rows(run(int(os.environ.get("REPRO_BENCH_REPEATS", "3"))))
