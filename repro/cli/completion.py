"""Shell completion of run refs (click's `shell_complete`): run ids, `latest`, `latest~N`, capsule files.

Click drives it (README, "Shell completion"); this only answers "which refs start with what was
typed". It reads the store's run directory names and the file system, nothing else, and never
fails: a completion that raises would print a traceback into the user's prompt.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import click
from click.shell_completion import CompletionItem

from repro.errors import ReproError
from repro.store.runs import Store

_LATEST_BACK = 9  # latest~1 … latest~9 are offered; older runs are reached by id


def complete_ref(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The refs that start with ``incomplete``: `latest` (`latest~N` once `latest~` is typed), run
    ids newest first, and capsule `.tar` files in the folder typed so far."""
    try:
        ids = _run_ids(ctx)
    except (ReproError, OSError, sqlite3.Error):
        ids = []
    words = ["latest", *(f"latest~{n}" for n in range(1, min(len(ids), _LATEST_BACK + 1)))] if ids else []
    if not incomplete.startswith("latest~"):
        words = words[:1]
    words += ids
    found = [CompletionItem(w) for w in words if w.startswith(incomplete)]
    return found + _capsule_files(incomplete)


def _run_ids(ctx: click.Context) -> list[str]:
    """The ids of the store the command would open (`-C DIR` honoured), newest first."""
    start = ctx.find_root().params.get("project_dir")
    store = Store.open(Path(start) if start else Path.cwd())
    return store.run_ids()[::-1]


def _capsule_files(incomplete: str) -> list[CompletionItem]:
    """Capsule `.tar` files whose path starts with ``incomplete`` (in the folder typed so far)."""
    folder, slash, prefix = incomplete.rpartition("/")
    where = Path(folder + slash) if slash else Path(".")
    try:
        entries = sorted(os.scandir(where), key=lambda e: e.name)
    except OSError:
        return []
    found: list[CompletionItem] = []
    for entry in entries:
        if not entry.name.startswith(prefix) or not entry.name.endswith(".tar"):
            continue
        try:
            if entry.is_file():
                found.append(CompletionItem(folder + slash + entry.name))
        except OSError:
            continue
    return found
