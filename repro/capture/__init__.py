"""One module per captured fact (code, data, deps, env, seeds, secrets, the command, Hydra).

The package itself is callable: `repro.capture(data=[...], outputs=[...])` records a run from
inside the process (see repro/inprocess.py). `repro.capture` names this package as soon as any
of its modules is imported, so the call lives on the package rather than beside it.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """`with repro.capture(data=[...], outputs=[...], seed=None):` records the block as a run."""
        from repro.inprocess import capture

        return capture(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
