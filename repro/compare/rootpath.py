"""The one rule for where a run ran: absolute paths under its project root are compared as `<project>/…`.

A run and its replay execute the same code in different directories (the project, a scratch copy of
it); what the run printed or saved about its own location (a log line naming a file, a Lightning
checkpoint's ``dirpath`` and ``best_model_path``) is the same result written from another place. Paths
are rewritten only for the comparison; the recorded bytes stay as they were.
"""

from __future__ import annotations

import os
import re

PLACEHOLDER = "<project>"


def spellings(root: str | None) -> tuple[str, ...]:
    """The ways a process may have written ``root``: as given and with links resolved (longest first)."""
    if not root or os.path.dirname(root) == root:  # no root, or `/`: nothing to rewrite
        return ()
    found = {root.rstrip(os.sep), os.path.realpath(root)}
    return tuple(sorted((r for r in found if r and r != os.sep), key=len, reverse=True))


def relative(text: str, roots: tuple[str, ...]) -> str:
    """``text`` with every occurrence of a spelling of the root written ``<project>`` (``/a/proj``
    in ``/a/proj/x`` and ``/a/proj``, never in ``/a/proj2``)."""
    for root in roots:
        if root in text:
            text = re.sub(re.escape(root) + r"(?![\w.-])", PLACEHOLDER, text)
    return text
