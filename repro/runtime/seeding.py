"""Notice when the script seeds an RNG itself: which call, with which value, from where.

Standard library only. ``random.seed``, ``numpy.random.seed``, ``numpy.random.default_rng``
with an explicit seed, ``torch.manual_seed`` and ``torch.cuda.manual_seed(_all)`` are wrapped
after the runtime has applied its own seeds; helpers such as Lightning's ``seed_everything``
go through these. A call made inside another wrapped call (``torch.manual_seed`` seeding
CUDA) and torch's own DataLoader worker seeding are not the script's, and are not reported.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any

from repro.runtime import contract, procreport

_local = threading.local()
_OWN = os.path.dirname(os.path.abspath(__file__))
_IMPORT_MACHINERY = ("<frozen importlib._bootstrap", "<frozen importlib.util")  # and _bootstrap_external
_TORCH_WORKER = os.path.join("torch", "utils", "data", "_utils", "worker.py")  # seeds each worker


def user_frame(frame: FrameType | None) -> str | None:
    """``file:line`` of the innermost frame in the user's code (under the project, not installed).

    A call made while a library module is being imported (a ``default_rng(0)`` at its top level)
    is that library's: the walk stops at the import machinery and names the library's line
    (``somelib/__init__.py:12``), never the script's ``import`` line, which chose nothing.
    """
    root = os.environ.get(contract.PROJECT_ROOT_ENV, "")
    root = os.path.abspath(root) + os.sep if root else ""
    fallback = None
    while frame is not None:
        filename = frame.f_code.co_filename
        name = os.path.abspath(filename)
        if filename.startswith(_IMPORT_MACHINERY):
            if fallback is not None:
                return fallback  # library code run by an import: the library set it
        elif not name.startswith(_OWN) and not filename.startswith("<"):
            installed = "site-packages" in name or "dist-packages" in name
            if root and name.startswith(root) and not installed:
                return f"{name[len(root) :]}:{frame.f_lineno}"
            if fallback is None:
                fallback = f"{_library_path(name)}:{frame.f_lineno}"
        frame = frame.f_back
    return fallback


def _library_path(name: str) -> str:
    """A library file as shown: below its site-packages, else its package folder and name."""
    for marker in ("site-packages", "dist-packages"):
        if marker + os.sep in name:
            return name.rsplit(marker + os.sep, 1)[1].replace(os.sep, "/")
    return "/".join(name.split(os.sep)[-2:])


def _seed_value(value: Any) -> Any:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return repr(value)[:80]


def wrap(owner: Any, attr: str, api: str, *, explicit_only: bool = False) -> None:
    """Replace ``owner.attr`` by a wrapper that reports calls made by the script."""
    original: Callable[..., Any] | None = getattr(owner, attr, None)
    if original is None or getattr(original, "__repro_wrapped__", False):
        return

    @functools.wraps(original)
    def seeded(*args: Any, **kwargs: Any) -> Any:
        if getattr(_local, "inside", False):
            return original(*args, **kwargs)
        value = args[0] if args else next(iter(kwargs.values()), None)
        caller = sys._getframe(1)
        if not (explicit_only and value is None) and not caller.f_code.co_filename.endswith(_TORCH_WORKER):
            where = user_frame(caller)
            key = f"{api}:{value!r}:{where}"
            procreport.emit("seed", key, api=api, value=_seed_value(value), where=where)
        _local.inside = True
        try:
            return original(*args, **kwargs)
        finally:
            _local.inside = False

    seeded.__repro_wrapped__ = True  # type: ignore[attr-defined]
    setattr(owner, attr, seeded)


def watch_random(random_module: ModuleType) -> None:
    wrap(random_module, "seed", "random.seed")


def watch_numpy(np: ModuleType) -> None:
    wrap(np.random, "seed", "numpy.random.seed")
    wrap(np.random, "default_rng", "numpy.random.default_rng", explicit_only=True)


def watch_torch(torch: ModuleType) -> None:
    wrap(torch, "manual_seed", "torch.manual_seed")
    wrap(torch.random, "manual_seed", "torch.manual_seed")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None:
        wrap(cuda, "manual_seed", "torch.cuda.manual_seed")
        wrap(cuda, "manual_seed_all", "torch.cuda.manual_seed_all")
