"""Injected by repro: seeds every RNG and applies the determinism mode before user code runs.

Put on PYTHONPATH by the runner; does nothing unless REPRO_RUN_ID is set. Any other
sitecustomize further down sys.path is still run afterwards.
"""

import os

if os.environ.get("REPRO_RUN_ID"):
    try:
        from repro.runtime import boot as _repro_boot

        _repro_boot.boot()
    except Exception as _e:  # never stop the user's program from starting
        import sys

        sys.stderr.write(f"repro: runtime could not start: {type(_e).__name__}: {_e}\n")

    def _repro_chain() -> None:
        import importlib.util
        import sys

        here = os.path.dirname(os.path.abspath(__file__))
        seen = False
        for entry in sys.path:
            path = os.path.abspath(entry or ".")
            if path == here:
                seen = True
                continue
            candidate = os.path.join(path, "sitecustomize.py")
            if seen and os.path.isfile(candidate):
                spec = importlib.util.spec_from_file_location("_repro_chained_sitecustomize", candidate)
                if spec and spec.loader:
                    module = importlib.util.module_from_spec(spec)
                    spec.loader.exec_module(module)
                return

    try:
        _repro_chain()
    except Exception:
        pass
