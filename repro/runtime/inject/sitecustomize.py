"""Injected by repro: seeds every RNG and applies the determinism mode before user code runs.

Put on PYTHONPATH by the runner; does nothing unless REPRO_RUN_ID is set. Any other
sitecustomize further down sys.path is still run afterwards. It spells REPRO_RUN_ID and
REPRO_RUNTIME_DIR itself (their home is `repro.runtime.contract`): it must say why the runtime did not
boot even when the package cannot be imported.
"""

import os

if os.environ.get("REPRO_RUN_ID"):
    try:
        from repro.runtime import boot as _repro_boot

        _repro_boot.boot()
    except Exception as _e:  # never stop the user's program, never write into its output
        try:
            _dir = os.environ.get("REPRO_RUNTIME_DIR", "")
            with open(os.path.join(_dir, f"boot-error.{os.getpid()}.txt"), "w") as _f:
                _f.write(f"{type(_e).__name__}: {_e}\n")
        except OSError:
            pass

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
