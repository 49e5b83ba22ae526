"""The `repro` executable (and `python -m repro`): the CLI is imported inside a guard, so Ctrl-C
while it loads is one line."""

from __future__ import annotations

import sys


def run() -> None:
    """Ctrl-C while the CLI is still being imported exits 130 with one line, not a traceback."""
    try:
        from repro.cli import main
    except KeyboardInterrupt:
        sys.stderr.write("repro: error: interrupted\n")
        sys.exit(130)
    sys.exit(main())


if __name__ == "__main__":
    run()
