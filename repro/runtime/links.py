"""What an integration running inside the training process tells the runner: linked tracker runs,
a framework's own seed and settings.

Standard library only. One JSON object per line in ``$REPRO_RUNTIME_DIR/links.jsonl``
(``links.rankN.jsonl`` for torchrun rank N > 0; `contract.STREAMS`); nothing is written outside a
repro run.
"""

from __future__ import annotations

import json
import os
from typing import Any

from repro.runtime import contract, jsonl

_appender = jsonl.Appender("links", dumps=lambda row: json.dumps(row, default=str, sort_keys=True))


def active() -> bool:
    """Whether this process runs under `repro run` (or `repro.capture`)."""
    return bool(os.environ.get(contract.RUN_ID_ENV) and os.environ.get(contract.RUNTIME_DIR_ENV))


def note(kind: str, **fields: Any) -> None:
    """Append one fact for the runner (`kind`: "mlflow", "wandb", "framework", …)."""
    if not active():
        return
    _appender.write({contract.ROW_KIND: kind, **fields})


def in_project(path: str | os.PathLike[str]) -> str | None:
    """A path as seen by this process, relative to the project root; None when outside it.

    The runner resolves it against its own view of the project (a container sees the
    project at another path than the host).
    """
    root = os.environ.get(contract.PROJECT_ROOT_ENV)
    if not root:
        return None
    full = os.path.abspath(path)
    root = os.path.abspath(root)
    if full == root or full.startswith(root + os.sep):
        return os.path.relpath(full, root)
    return None


# --------------------------------------------------------------------------- trackers' own variables


def tracker_environment() -> None:
    """Pass the repro run to W&B through its documented variables, read when `wandb.init()` runs.

    ``WANDB_TAGS`` gains ``repro:<run id>`` (tags the user set are kept). W&B also documents
    ``WANDB_CONFIG_PATHS``, but wandb 0.31 rejects it when set (its settings model wants a
    list), so the run id travels as a tag only. Set once, in the run's first process; every
    child inherits it.
    """
    if not active():
        return
    tag = f"repro:{os.environ[contract.RUN_ID_ENV]}"
    tags = [t for t in os.environ.get("WANDB_TAGS", "").split(",") if t]
    if tag not in tags:
        os.environ["WANDB_TAGS"] = ",".join([*tags, tag])
