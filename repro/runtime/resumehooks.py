"""Exact resume installed into the training process: torch's, safetensors' and Lightning's checkpoint
save and load wrapped, NumPy's generators tracked, optimizer steps and barriers hooked, by module name.

Standard library only; torch and NumPy are reached through the modules the script imported.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from repro.runtime import (
    ckptrecord,
    ckptrestore,
    contract,
    loaderseeds,
    passthrough,
    resumestate,
    resumesteps,
    spoil,
    statewatch,
)

MAX_GENERATORS = 1000  # default_rng generators tracked per process


def _wrap_checkpoint_io(
    module: ModuleType,
    save_name: str,
    load_name: str,
    path_name: str,
    load_path_name: str = "",
    loaded: Callable[[Any], None] | None = None,
) -> None:
    """Wrap MODULE's save (path second, as ``torch.save(obj, f)``) and load (path first) functions.

    PATH_NAME is the path parameter's keyword name (LOAD_PATH_NAME the load's, when it differs);
    a save records the RNG states linked to the file, a load in a resumed process restores
    them right after it (and then hands what it loaded to ``loaded``).
    """
    save, load = getattr(module, save_name), getattr(module, load_name)

    def path(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str) -> Any:
        return args[index] if len(args) > index else kwargs.get(name)

    # Through passthrough.call: a warning the function raises for its caller names the script's line.
    def wrapped_save(*args: Any, **kwargs: Any) -> Any:
        f = path(args, kwargs, 1, path_name)
        if ckptrecord.pending and isinstance(f, (str, os.PathLike)):
            ckptrecord.wait(f)  # the file is about to be overwritten: its hash first
        result = passthrough.call(save, *args, **kwargs)
        ckptrecord.after_save(f)
        return result

    def wrapped_load(*args: Any, **kwargs: Any) -> Any:
        f = path(args, kwargs, 0, load_path_name or path_name)
        digest = ckptrestore.before_load(f)
        result = passthrough.call(load, *args, **kwargs)
        ckptrestore.after_load(f, digest)
        if loaded is not None and digest is not None:
            loaded(result)
        return result

    setattr(module, save_name, functools.update_wrapper(wrapped_save, save))
    setattr(module, load_name, functools.update_wrapper(wrapped_load, load))


def install_torch(torch: ModuleType) -> None:
    """Wrap ``torch.save``/``torch.load`` and count optimizer steps."""
    if resumestate.runtime_dir() is None:
        return
    _wrap_checkpoint_io(torch, "save", "load", "f")
    spoil.install_torch(torch)
    statewatch.install(torch)  # schedulers' and samplers' epochs, for the resume trace
    optimizer = sys.modules.get("torch.optim.optimizer")
    if optimizer is None:
        import importlib

        optimizer = importlib.import_module("torch.optim.optimizer")
    sys.addaudithook(ckptrecord.on_audit)
    if os.environ.get(contract.RESUME_TRACE_ENV) == "1":
        optimizer.register_optimizer_step_pre_hook(resumesteps.before_step)
        atexit.register(resumesteps.flush_trace)
    optimizer.register_optimizer_step_post_hook(resumesteps.after_step)
    dist = getattr(torch, "distributed", None)
    if resumestate.world() > 1 and dist is not None and hasattr(dist, "barrier"):
        barrier = dist.barrier

        def wrapped_barrier(*args: Any, **kwargs: Any) -> Any:
            result = barrier(*args, **kwargs)
            resumesteps.after_barrier()
            return result

        functools.update_wrapper(wrapped_barrier, barrier)
        setattr(dist, "barrier", wrapped_barrier)  # noqa: B010


def install_numpy(np: ModuleType) -> None:
    """Track every ``default_rng`` generator, so its state is recorded and restored by creation order."""
    if resumestate.runtime_dir() is None:
        return
    spoil.install_numpy(np)
    original = np.random.default_rng

    def default_rng(*args: Any, **kwargs: Any) -> Any:
        generator = original(*args, **kwargs)
        index = len(resumestate.state["generators"])
        if index < MAX_GENERATORS:
            resumestate.state["generators"].append(generator)
            pending = resumestate.state.get("pending_generators") or []
            if index < len(pending):
                generator.bit_generator.state = pending[index]
        return generator

    np.random.default_rng = default_rng


def install_safetensors(module: ModuleType) -> None:
    """Record states at ``safetensors.torch.save_file`` and restore at ``load_file``."""
    if resumestate.runtime_dir() is None:
        return
    _wrap_checkpoint_io(module, "save_file", "load_file", "filename")


def install_lightning(module: ModuleType) -> None:
    """Lightning saves through a byte buffer then fsspec (``cloud_io._atomic_save``), and loads
    through ``cloud_io._load``: wrap both, by path. Runs before Lightning's own modules import
    them by name."""
    if (
        resumestate.runtime_dir() is None
        or not hasattr(module, "_atomic_save")
        or not hasattr(module, "_load")
    ):
        return
    _wrap_checkpoint_io(module, "_atomic_save", "_load", "filepath", "path_or_url", _lightning_progress)


def _lightning_progress(checkpoint: Any) -> None:
    """A fit resumed mid-epoch takes the rest of the epoch from a new iterator, counting the batches it
    took (its training batch progress): the recorded epoch that iterator continues leaves those out.

    A checkpoint with the fit loop's state puts Lightning's own loop counters back as Lightning keeps
    them, which can differ from an uninterrupted fit's in the checkpoints it writes next: said as a
    resume event (``inexact``), which the record turns into a warning."""
    try:
        fit = checkpoint["loops"]["fit_loop"]
    except (KeyError, TypeError):
        return
    resumestate.event("inexact", state=contract.LIGHTNING_LOOPS)
    try:
        loaderseeds.taken(int(fit["epoch_loop.batch_progress"]["current"]["ready"]))
    except (KeyError, TypeError, ValueError):
        pass


HOOKS = {
    "torch": install_torch,
    "numpy": install_numpy,
    "safetensors.torch": install_safetensors,
    "lightning.fabric.utilities.cloud_io": install_lightning,
    "lightning_fabric.utilities.cloud_io": install_lightning,
}
