"""What runs inside the training process before the user's script: seeds, knobs, audit.

Standard library only; torch and NumPy settings are applied right after the script
imports them (a `sys.meta_path` hook), so processes that never import torch (pip,
a shell helper) pay nothing.

Files written to $REPRO_RUNTIME_DIR (a torchrun rank N adds `.rankN` before the suffix;
the launcher process itself writes the plain names):
  env.json       the interpreter, torch/CUDA versions, installed packages, a fingerprint
  knobs.json     the determinism knobs actually applied, and the process-group backend
  dataorder.jsonl  per DataLoader batch, a running digest of the sample indices (repro.runtime.batchorder)
  proc.<pid>.jsonl  what each process did, as it happened (repro.runtime.procreport): that it
                 started, the files it read and wrote, the seeds the script set itself
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import platform
import random
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from repro.runtime import (
    batchorder,
    compiling,
    contract,
    files,
    jsonl,
    ledger,
    links,
    opstream,
    procreport,
    resumehooks,
    seeding,
    steptrace,
)

_state: dict[str, Any] = {"knobs": {}}


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def boot() -> None:
    """Seed, install the import hooks, the audit hook and the exit writer."""
    rank = jsonl.rank()
    seed = contract.rank_seed(_env_int(contract.SEED_ENV, 0), rank)
    mode = os.environ.get(contract.MODE_ENV, contract.DEFAULT_MODE)
    main = contract.BOOT_PID_ENV not in os.environ
    if main:
        os.environ[contract.BOOT_PID_ENV] = str(os.getpid())
        links.tracker_environment()
        compiling.private_caches()
    _state.update(seed=seed, mode=mode, rank=rank, main=main)
    _report_in(main)
    os.register_at_fork(after_in_child=lambda: _report_in(False))
    random.seed(seed)
    seeding.watch_random(random)
    ledger.watch_warnings()
    ledger.watch_errors()
    _on_import("numpy", _apply_numpy)
    _on_import("torch", _apply_torch)
    for name in ("safetensors.torch", "safetensors.numpy"):
        _on_import(name, lambda module: _report_writes(module, "save_file", 1, "filename"))
    _on_import("torch.utils.data.dataloader", batchorder.install)  # the samples each DataLoader yielded
    for name, hook in resumehooks.HOOKS.items():  # exact resume: checkpoints' RNG states (resumehooks.py)
        _on_import(name, hook)
    root = os.environ.get(contract.PROJECT_ROOT_ENV)
    if root:
        files.install(root)
    if main or rank >= 0:
        atexit.register(_write_files)


def _report_in(main: bool) -> None:
    """The proof that the runtime ran in this process (the runner looks for the main one)."""
    procreport.emit(
        "boot", pid=os.getpid(), ppid=os.getppid(), rank=_state.get("rank", -1), main=main,
        mode=_state.get("mode"), seed=_state.get("seed"), attempt=_attempt(),
    )  # fmt: skip


def _attempt() -> int:
    """Which start of a requeued job this process belongs to (0: the first, or no requeue)."""
    value = os.environ.get(contract.ATTEMPT_ENV, "")
    return int(value) if value.isdigit() else 0


# --------------------------------------------------------------------------- import hooks


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs callbacks, in registration order, once a module has finished executing."""

    def __init__(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        self.name, self.callbacks = name, [callback]

    def find_spec(
        self, fullname: str, path: Any, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original = loader.exec_module
        callbacks = self.callbacks

        def exec_module(module: ModuleType) -> None:
            original(module)
            for callback in callbacks:
                try:
                    callback(module)
                except Exception as e:  # the user's program must still run; the runner reports it
                    key = f"{fullname}:{type(e).__name__}"
                    procreport.emit("error", key, where=fullname, error=str(e)[:300])

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _on_import(name: str, callback: Callable[[ModuleType], None]) -> None:
    if name in sys.modules:
        callback(sys.modules[name])
        return
    for finder in sys.meta_path:
        if isinstance(finder, _AfterImport) and finder.name == name:
            finder.callbacks.append(callback)
            return
    sys.meta_path.insert(0, _AfterImport(name, callback))


def _apply_numpy(np: ModuleType) -> None:
    seed = _state["seed"]
    np.random.seed(seed)
    original = np.random.default_rng
    counter = [0]

    def default_rng(seed_arg: Any = None) -> Any:
        # An unseeded generator gets a stream derived from the run's seed and its creation order.
        if seed_arg is None:
            seed_arg = np.random.SeedSequence([seed, counter[0]])
            counter[0] += 1
        return original(seed_arg)

    np.random.default_rng = default_rng
    _state["knobs"]["numpy_seeded"] = True
    seeding.watch_numpy(np)


def _apply_torch(torch: ModuleType) -> None:
    seed, mode = _state["seed"], _state["mode"]
    knobs = _state["knobs"]
    torch.manual_seed(seed)  # CPU and every CUDA device
    warn_only = os.environ.get(contract.ALLOW_NONDETERMINISTIC_OPS_ENV) == "1"
    switches = contract.torch_switches(mode, _env_int(contract.THREADS_ENV, 1), warn_only)
    if switches:
        _pin_torch(torch, switches)
    knobs["cpu_capability"] = _safe(lambda: torch.backends.cpu.get_cpu_capability())
    seeding.watch_torch(torch)
    _report_writes(torch, "save", 1)
    _report_writes(getattr(torch, "jit", None), "save", 1)
    if _state.get("rank", -1) >= 0:
        _watch_process_group(torch)
    if os.environ.get(contract.TRACE_ENV) == "1" and os.environ.get(contract.RUNTIME_DIR_ENV):
        _trace_steps(torch)
        ledger.count_steps(torch)
    compiling.install(torch, contract.pins(mode), knobs)  # torch.compile: settings and what compiled
    opstream.install(torch)  # the op stream, when the run asked for it (repro.runtime.opstream)


def _pin_torch(torch: ModuleType, switches: dict[str, Any]) -> None:
    """Apply a pinned mode's switches (`contract.torch_switches`); note what was applied."""
    knobs = _state["knobs"]
    torch.set_num_threads(switches["threads"])
    knobs["threads"] = torch.get_num_threads()
    try:
        torch.set_num_interop_threads(switches["interop_threads"])
        knobs["interop_threads"] = switches["interop_threads"]
    except RuntimeError:
        knobs["interop_threads"] = torch.get_num_interop_threads()
    # Nondeterministic ops are errors unless the run allowed them (then warnings, counted).
    torch.use_deterministic_algorithms(
        switches["deterministic_algorithms"], warn_only=switches["deterministic_warn_only"]
    )
    knobs["deterministic_algorithms"] = switches["deterministic_algorithms"]
    torch.backends.cudnn.deterministic = switches["cudnn_deterministic"]
    torch.backends.cudnn.benchmark = switches["cudnn_benchmark"]
    knobs["cudnn_deterministic"] = switches["cudnn_deterministic"]
    knobs["cudnn_benchmark"] = switches["cudnn_benchmark"]
    if "matmul_allow_tf32" in switches:
        torch.backends.cuda.matmul.allow_tf32 = switches["matmul_allow_tf32"]
        torch.backends.cudnn.allow_tf32 = switches["cudnn_allow_tf32"]
        knobs["tf32"] = False
    _state["set"] = {**switches, "threads": knobs["threads"]}


def _trace_steps(torch: ModuleType) -> None:
    """After every optimizer step, each parameter's sum and digest of its bytes to trace.jsonl (steptrace)."""
    steptrace.install(torch, Path(str(jsonl.stream_path("trace", os.environ[contract.RUNTIME_DIR_ENV]))))
    _state["knobs"]["trace"] = True


def _watch_process_group(torch: ModuleType) -> None:
    """Record the process-group backend (gloo, nccl…) once the script initialises one."""
    dist = getattr(torch, "distributed", None)
    if dist is None or not _safe(lambda: dist.is_available()):
        return
    original = dist.init_process_group

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        _note_process_group(dist)
        return result

    init_process_group.__wrapped__ = original  # type: ignore[attr-defined]
    init_process_group.__doc__ = original.__doc__
    dist.init_process_group = init_process_group


def _note_process_group(dist: ModuleType) -> None:
    if _safe(lambda: dist.is_initialized()):
        backend = _safe(lambda: str(dist.get_backend()))
        if backend:
            _state["knobs"]["process_group_backend"] = backend


def _safe(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:
        return None


# --------------------------------------------------------------------------- C-level writers


def _report_writes(owner: Any, attr: str, index: int, keyword: str = "f") -> None:
    """Wrap a function that writes a file from C, so the file is reported as written."""
    original = getattr(owner, attr, None) if owner is not None else None
    if original is None or getattr(original, "__repro_wrapped__", False):
        return

    def writer(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        files.note_written(args[index] if len(args) > index else kwargs.get(keyword))
        return result

    writer.__wrapped__ = original  # type: ignore[attr-defined]
    writer.__doc__ = original.__doc__
    writer.__repro_wrapped__ = True  # type: ignore[attr-defined]
    setattr(owner, attr, writer)


# --------------------------------------------------------------------------- exit


def _ranked(name: str) -> str:
    return contract.ranked(name, _state.get("rank", -1))


def _write_files() -> None:
    out = os.environ.get(contract.RUNTIME_DIR_ENV)
    if not out:
        return
    d = Path(out)
    dist = sys.modules.get("torch.distributed")
    if dist is not None:
        _note_process_group(dist)
    ledger.flush()
    torch = sys.modules.get("torch")
    try:
        if _state.get("rank", -1) >= 0 or _state.get("main"):
            compiling.record(_state["knobs"])
            (d / _ranked(contract.KNOBS_FILE)).write_text(json.dumps(_state["knobs"], sort_keys=True))
            if torch is not None and hasattr(torch, "backends"):
                found = ledger.effective(torch)
                state = {
                    "effective": found,
                    "changed_by_script": ledger.changed(_state.get("set", {}), found),
                }
                (d / _ranked(contract.STATE_FILE)).write_text(json.dumps(state, sort_keys=True, default=str))
            (d / _ranked(contract.ENV_FILE)).write_text(json.dumps(_environment(), sort_keys=True))
    except OSError:
        pass


def _environment() -> dict[str, Any]:
    from repro.runtime import dists as installed

    dists: dict[str, str] = {}
    fingerprint = hashlib.sha256()
    for raw, version, dist in sorted(installed.installed(), key=lambda found: found[0].lower()):
        name = raw.lower().replace("_", "-").replace(".", "-")
        if not name or name in dists:
            continue
        dists[name] = version
        fingerprint.update(f"{name}=={version}\n".encode())
        fingerprint.update((dist.read_text("RECORD") or "").encode())
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "freeze": [f"{k}=={v}" for k, v in sorted(dists.items())],
        "site_fingerprint": fingerprint.hexdigest()[:32],
        "rank": _state.get("rank", -1),
        "world_size": _env_int("WORLD_SIZE", 1),
        "local_rank": jsonl.local_rank(),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        env["torch"] = getattr(torch, "__version__", None)
        env["cuda"] = getattr(torch.version, "cuda", None)
        env["cudnn"] = _safe(lambda: torch.backends.cudnn.version())
        if _safe(lambda: torch.cuda.is_available()):
            env["gpus"] = [
                {"index": i, "name": torch.cuda.get_device_name(i)} for i in range(torch.cuda.device_count())
            ]
            env["device"] = f"cuda:{torch.cuda.current_device()}"
            env["nccl"] = _safe(lambda: ".".join(map(str, torch.cuda.nccl.version())))
        else:
            env["device"] = "cpu"
    return env
