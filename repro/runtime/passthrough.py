"""Calls through the runtime's wrappers keep the warnings of the wrapped function at the user's line.

``torch.load`` warns with ``stacklevel=2`` ("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD detected…") to name
the line that called it. Once the runtime wraps ``torch.load``, that line is the wrapper's, in
repro's own file. `call` runs the wrapped function with its warnings recorded, and issues each
again afterwards: one that points at the wrapper (or at `call`) points at the wrapper's caller
instead, every other where it pointed. The filters decide as they would have: an ``error`` filter still raises
inside the call, an ``ignore`` filter still drops it, and ``once``/``default`` count the user's
line. (``warnings.warn(skip_file_prefixes=…)`` does this only for the code that warns itself.)

Standard library only.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

_REGISTRIES: dict[str, dict[Any, Any]] = {}  # per file, for warnings that keep their own location


def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, called from a wrapper: its warnings that name the wrapper's line
    name the line that called the wrapper."""
    wrapper = sys._getframe(1)
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as log:
            caught = log
            return fn(*args, **kwargs)
    finally:
        _issue(caught, wrapper)


_HERE = call.__code__.co_filename  # the wrapped function's caller is `call` itself


def _issue(caught: list[warnings.WarningMessage], wrapper: FrameType) -> None:
    caller = wrapper.f_back
    for w in caught:
        if caller is not None and w.filename in (_HERE, wrapper.f_code.co_filename):
            where = caller.f_globals
            warnings.warn_explicit(
                w.message,
                w.category,
                caller.f_code.co_filename,
                caller.f_lineno,
                module=where.get("__name__"),
                registry=where.setdefault("__warningregistry__", {}),
                module_globals=where,
                source=w.source,
            )
        else:
            registry = _REGISTRIES.setdefault(w.filename, {})
            warnings.warn_explicit(
                w.message, w.category, w.filename, w.lineno, registry=registry, source=w.source
            )
