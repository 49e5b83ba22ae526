"""`torch.save` (and safetensors' `save_file`) of a 1 GiB state dict, with and without repro's hook.

    python benchmarks/bench_torch_save.py

In one process: the same save through the plain function and through the runtime's wrapper
(repro/runtime/resumehooks.py, as `repro run` installs it: RNG states recorded, the file hashed for
exact resume), to two files, interleaved A B B A A B …. Wall is the time until the save returns to
the training loop; CPU is the process's, the background hash included (it is waited for, as
the training would run on meanwhile). Size: REPRO_BENCH_SAVE_MB (1024). Medians. The files go
to /dev/shm when it has room (REPRO_BENCH_DIR otherwise): a shared disk's writeback swings a
1 GiB save's wall time by seconds, more than the difference measured.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import Row, log, median_sample, print_rows, scratch


def _timed(save: Callable[[], object], after: Callable[[], object]) -> tuple[float, float]:
    start, cpu0 = time.perf_counter(), time.process_time()
    save()
    wall = time.perf_counter() - start
    after()  # the background hash: its CPU counts, its wall does not block the loop
    return wall, time.process_time() - cpu0


def _pair(
    case: str, plain: Callable[[Any, Path], object], wrapped: Callable[[Any, Path], object],
    state: Any, d: Path, suffix: str, repeats: int,
) -> Row:  # fmt: skip
    from repro.runtime import ckptrecord

    walls: dict[str, list[float]] = {"A": [], "B": []}
    cpus: dict[str, list[float]] = {"A": [], "B": []}
    plain(state, d / f"warm{suffix}")  # page cache and allocator warm
    for i in range(repeats):
        pair = (("A", plain), ("B", wrapped))
        for name, fn in pair if i % 2 == 0 else pair[::-1]:  # A B B A A B …: neither side always first
            wall, cpu = _timed(
                lambda fn=fn, name=name, i=i: fn(state, d / f"{name}{i}{suffix}"), ckptrecord.wait
            )
            walls[name].append(wall)
            cpus[name].append(cpu)
            (d / f"{name}{i}{suffix}").unlink()
    note = "wall: until the save returns; cpu: the background sha256 included; medians, interleaved"
    bare, ours = (median_sample(list(zip(walls[k], cpus[k], strict=True))) for k in ("A", "B"))
    return Row(case, "the same save without repro", bare, ours, "<= 1.05x", "within", 1.05, note=note)


def run(repeats: int = 5) -> list[Row]:
    import torch

    mb = int(os.environ.get("REPRO_BENCH_SAVE_MB", "1024"))
    shm = Path("/dev/shm")
    before = dict(os.environ)
    if "REPRO_BENCH_DIR" not in os.environ and shm.is_dir() and shutil.disk_usage(shm).free > 4 * mb << 20:
        os.environ["REPRO_BENCH_DIR"] = str(shm)
    try:
        rows = _rows(torch, mb, repeats)
    finally:  # the runtime's variables and the scratch place are this suite's only
        os.environ.clear()
        os.environ.update(before)
    return rows


def _rows(torch: Any, mb: int, repeats: int) -> list[Row]:
    from repro.runtime import ckptrecord, resumehooks

    tensors = max(mb // 64, 1)
    state = {f"layer{i}.weight": torch.randn(mb * (1 << 18) // tensors) for i in range(tensors)}  # float32
    rows: list[Row] = []
    with scratch("repro-bench-save-") as d:
        runtime = d / "runtime"
        runtime.mkdir()
        os.environ.update({"REPRO_RUNTIME_DIR": str(runtime), "REPRO_RUN_ID": "bench", "WORLD_SIZE": "1"})
        sys.addaudithook(ckptrecord.on_audit)  # what install_torch adds (renames, writes over a file hashing)
        module = SimpleNamespace(save=torch.save, load=torch.load)
        resumehooks._wrap_checkpoint_io(module, "save", "load", "f")  # type: ignore[arg-type]
        log(f"torch.save of {mb} MiB, {repeats} interleaved pairs")
        rows.append(
            _pair(f"torch.save of a {mb} MiB state dict", torch.save, module.save, state, d, ".pt", repeats)
        )
        try:
            import safetensors.torch as st
        except ImportError:
            return rows
        fake = SimpleNamespace(save_file=st.save_file, load_file=st.load_file)
        resumehooks._wrap_checkpoint_io(fake, "save_file", "load_file", "filename")  # type: ignore[arg-type]
        log(f"safetensors save_file of {mb} MiB, {repeats} interleaved pairs")
        rows.append(_pair(f"safetensors save_file of {mb} MiB", st.save_file, fake.save_file, state, d,
                          ".safetensors", repeats))  # fmt: skip
    return rows


if __name__ == "__main__":
    print_rows(run(int(os.environ.get("REPRO_BENCH_REPEATS", "5"))))
