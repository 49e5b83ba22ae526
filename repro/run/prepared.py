"""What a run is between its phases: the request (`RunRequest`), the captured record with what executing
it needs (`Prepared`), and the removal of a run that never started."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from repro.config import Settings
from repro.facts import lockplan
from repro.facts.secrets import Masker
from repro.store.record import Record
from repro.store.rundir import RunDir

if TYPE_CHECKING:
    from repro.backends.base import BuiltImage, OpenImage, RunSpec


@dataclass
class RunRequest:
    """The command to run and where; every setting comes from the `Plan`.

    ``injected`` are arguments repro appends to the user's command (Hydra's pinned run directory):
    run with it, recorded apart from it (`CommandInfo.injected`).
    """

    argv: list[str]
    cwd: Path
    injected: list[str] = field(default_factory=list)


@dataclass
class Prepared:
    """A captured record plus what executing it needs."""

    record: Record
    spec: RunSpec
    run_dir: Path
    outputs_before: dict[str, tuple[int, int, int]]
    settings: Settings
    started_ns: int = 0  # when the run began: files other runs claim after this are theirs
    tree_before: dict[str, tuple[int, int, int]] | None = None  # the project's files, for unwatched runs
    lock: lockplan.PendingLock | None = None  # None: ``lockfile`` is final (a replay)
    masker: Masker | None = None  # None: secrets of this process's environment only
    foreign: bool = False  # made from a run from elsewhere (repro/sandbox.py): host tracking URIs only
    lockfile: Path | None = None  # the run's lock: a re-execution's recorded one, a new run's once settled
    recorded_image: BuiltImage | None = None  # the image a capsule carries: replayed in, never rebuilt
    image_archive: OpenImage | None = None  # that image's archive, loaded when the engine lacks the image


ProgressFactory = Callable[[str], Callable[[int, int], None] | None]


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def discard(prepared: Prepared) -> None:
    """Remove the directory of a run that never started (nothing of it is worth keeping)."""
    if not RunDir(prepared.run_dir).record.is_file():
        shutil.rmtree(prepared.run_dir, ignore_errors=True)
