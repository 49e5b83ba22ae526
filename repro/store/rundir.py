"""A run directory's layout: the one place the names inside ``.repro/runs/<id>/`` are spelled.

Layout::

    runs/<id>/capsule.yaml              the sealed record (written last, atomically)
    runs/<id>/running.json              present while the run is in progress (pid, started; a job's state)
    runs/<id>/detached.json             a submitted Slurm job no process waits for
    runs/<id>/foreign.json              the record came from elsewhere (repro/sandbox.py)
    runs/<id>/helper.json               an execution another command made for itself (`diff --prove`):
                                        hidden from `repro ls` and `latest`, reachable by its id
    runs/<id>/code/                     a re-execution's restored code (a replay's scratch copy)
    runs/<id>/work/                     what the run needs while it executes; removed when it is sealed
    runs/<id>/work/runtime/             the repro runtime's reports (REPRO_RUNTIME_DIR)
    runs/<id>/work/stdout.log, stderr.log   the command's streams
    runs/<id>/work/record.yaml, kept.json   the record as it started, for `repro resume` if repro dies
    runs/<id>/work/requirements.lock.txt    a re-execution's lockfile, restored from its record

The build log (``build.log``) is named by `repro.backends.buildlog`, which writes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from repro.store.capsule import RECORD_NAME

RUNNING = "running.json"
DETACHED = "detached.json"  # a detached job, sealed by `repro ls` once it ended
FOREIGN = "foreign.json"  # the store's own mark that the record came from elsewhere
HELPER = "helper.json"  # the store's own mark of a helper execution, hidden from listings
WORK = "work"
PENDING_RECORD = "record.yaml"  # under work/ while the run executes
PENDING_KEPT = "kept.json"
LOCKFILE = "requirements.lock.txt"


@dataclass(frozen=True)
class RunDir:
    """One run's directory and the paths inside it."""

    path: Path

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def record(self) -> Path:
        """The sealed record; its presence is what makes a run sealed."""
        return self.path / RECORD_NAME

    @property
    def running(self) -> Path:
        return self.path / RUNNING

    @property
    def detached(self) -> Path:
        return self.path / DETACHED

    @property
    def foreign(self) -> Path:
        return self.path / FOREIGN

    @property
    def helper(self) -> Path:
        return self.path / HELPER

    @property
    def code(self) -> Path:
        """Where a re-execution restores the recorded code."""
        return self.path / "code"

    @property
    def work(self) -> Path:
        """What the run needs while it executes; removed when it is sealed."""
        return self.path / WORK

    @property
    def runtime(self) -> Path:
        """The runtime's reports (``REPRO_RUNTIME_DIR``)."""
        return self.work / "runtime"

    @property
    def stdout(self) -> Path:
        return self.work / "stdout.log"

    @property
    def stderr(self) -> Path:
        return self.work / "stderr.log"

    @property
    def pending_record(self) -> Path:
        """The record as the run started, kept until it is sealed (`repro resume` seals it if repro died)."""
        return self.work / PENDING_RECORD

    @property
    def pending_kept(self) -> Path:
        """What sealing the run later needs beside its record: outputs, data, the files before it."""
        return self.work / PENDING_KEPT

    @property
    def lockfile(self) -> Path:
        """Where a re-execution's lockfile, restored from its record, is written."""
        return self.work / LOCKFILE
