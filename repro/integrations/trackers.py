"""Tracker runs and framework settings the training process reported (repro/runtime/links.py),
folded into the record; tags added to the linked MLflow runs once the record is sealed.

Each tracking tool is an entry of `TRACKERS`, a `Tracker` with one hook per phase of a run (its
image's variables, the rows its integration noted, the files it wrote, its stores, before and after
the seal, a verdict); the run calls one function per phase here, which walks the registry. An entry
writes only the hooks of the phases it takes part in; the others do nothing. Adding a tool: its
class here, its entry in `TRACKERS`.

Trouble with a tracker never fails a run: it becomes a notice. Tools are imported only when a
run actually used them.

Trackers from the host only: for a run from elsewhere (`repro.sandbox`; its replays, checks and
their records, whose tracker entries the replayed code itself reports), repro contacts a tracking
URI only when it is the one this machine configured (``MLFLOW_TRACKING_URI`` of the replaying
process), with this machine's credentials; any other URI such a record names is shown in a note,
never contacted, and no file store it names is opened.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from repro.backends.base import BuiltImage
from repro.collect import produced
from repro.runtime import contract
from repro.store import limits
from repro.store.capsule import RECORD_NAME
from repro.store.record import Record
from repro.store.tarwriter import pack

Note = Callable[[str], None]
MLFLOW, WANDB, FRAMEWORK = "mlflow", "wandb", "framework"
Entries = dict[tuple[str, str], dict[str, Any]]  # a record's tracker entries as they are folded, by key


class Tracker(Protocol):
    """A tracking tool as a run's phases see it: ``tool`` names its entries in the record
    (`results.trackers`, ``{"tool": …}``) and the rows its integration notes (`links.note(tool, …)`)."""

    tool: str

    def environment(self, image: BuiltImage | None) -> dict[str, str]:
        """Variables the command gets that name its image to the tool."""
        return {}

    def fold(self, row: dict[str, Any], entries: Entries) -> None:
        """A row the training process noted for this tool, into the record's entries."""
        return None

    def from_files(self, written: set[str]) -> list[dict[str, Any]]:
        """Entries for the tool's runs, found from the files the run wrote."""
        return []

    def store_files(self, record: Record) -> list[str]:
        """Project-relative files of the tool's stores besides its entries' ``path`` (a journal)."""
        return []

    def outside_stores(self, record: Record) -> list[str]:
        """Absolute paths of the tool's stores outside the project that the run wrote to."""
        return []

    def before_seal(self, record: Record, project_root: Path, note: Note, foreign: bool) -> None:
        """Complete the record's entries from the tool itself (the runs it started)."""
        return None

    def after_seal(self, record: Record, sealed: Sealed, note: Note) -> None:
        """Tell the tool about the sealed record (a tag, the capsule as an artifact)."""
        return None

    def report_verdict(
        self, record: Record, status: str, project_root: Path, note: Note, foreign: bool
    ) -> None:
        """Tell the tool the verdict of a replay or check of ``record``."""
        return None


@dataclass(frozen=True)
class Sealed:
    """What the after-seal hooks get: the sealed run's directory and blobs, and what was asked."""

    run_dir: Path
    project_root: Path
    blob_path: Callable[[str], Path]
    log_capsule: bool
    foreign: bool


# --------------------------------------------------------------------------- the phases, over the registry


def image_environment(image: BuiltImage | None) -> dict[str, str]:
    """Variables that name the run's image to every tracker."""
    found: dict[str, str] = {}
    for tracker in TRACKERS:
        found.update(tracker.environment(image))
    return found


def fold(record: Record, runtime_dir: Path) -> None:
    """Put what the process noted into the record: tracker runs, a framework's seed, its warnings."""
    entries: Entries = {}
    by_tool = {t.tool: t for t in TRACKERS}
    for row in noted(runtime_dir):
        kind = row.pop(contract.ROW_KIND)
        if kind == FRAMEWORK:
            name = str(row.pop("name", "framework"))
            for warning in row.pop("warnings", []) or []:
                record.warn("framework_override", str(warning))
            record.seeds.framework.setdefault(name, {}).update(row)
        elif kind in by_tool:
            by_tool[kind].fold(row, entries)
    record.results.trackers = list(entries.values())


def noted(runtime_dir: Path) -> list[dict[str, Any]]:
    """Every fact the run's processes noted (``links*.jsonl``), rank 0's first; read as the run's
    own files are (`repro.collect.produced`: a link is not followed)."""
    return [
        row
        for rel in produced.files(runtime_dir, f"{contract.STREAMS['links'].log}*.jsonl")
        for row in produced.json_lines(runtime_dir, rel, limits.MAX_LINKS_BYTES)
        if isinstance(row.get(contract.ROW_KIND), str)
    ]


def find_runs(record: Record, written: set[str]) -> None:
    """Name the tracker runs the command started, from the files the trackers wrote for them."""
    for tracker in TRACKERS:
        record.results.trackers += tracker.from_files(written)


def store_paths(record: Record) -> list[str]:
    """Project-relative directories and files where trackers keep their own (`mlruns`, `wandb`,
    `mlflow.db` with its SQLite journal).

    What a tracker writes there (run ids, clock times) is its bookkeeping: neither an output
    nor an undeclared input of the run.
    """
    found = {str(t["path"]) for t in record.results.trackers if t.get("path")}
    for tracker in TRACKERS:
        found.update(tracker.store_files(record))
    return sorted(found)


def outside_stores(record: Record) -> list[str]:
    """Absolute paths of tracker stores outside the project that the run wrote to (a replay's MLflow
    runs in the host's store): the tracker's bookkeeping, not files the run wrote outside the project."""
    return [path for tracker in TRACKERS for path in tracker.outside_stores(record)]


def before_seal(record: Record, project_root: Path, note: Note, foreign: bool = False) -> None:
    """Complete the record's tracker entries from the trackers themselves (the MLflow runs started).

    ``foreign``: the run was made from a run from elsewhere (only the host's tracking URI is contacted).
    """
    for tracker in TRACKERS:
        tracker.before_seal(record, project_root, note, foreign)


def after_seal(
    record: Record, run_dir: Path, project_root: Path, blob_path: Callable[[str], Path],
    log_capsule: bool, note: Note, foreign: bool = False,
) -> None:  # fmt: skip
    """Tell each tracker about the sealed record: the linked MLflow runs tagged with the capsule's
    digest, the capsule file logged when asked.

    ``foreign``: the run was made from a run from elsewhere (only the host's tracking URI is contacted).
    """
    sealed = Sealed(run_dir, project_root, blob_path, log_capsule, foreign)
    for tracker in TRACKERS:
        tracker.after_seal(record, sealed, note)


def report_verdict(
    records: list[Record], status: str, project_root: Path, note: Note, foreign: bool = False
) -> None:
    """Tell each tracker linked to these records the verdict (`repro.verdict`, after a replay or check).

    ``foreign``: the records are of a run from elsewhere and its replay (only the host's tracking URI
    is contacted; any other is named in a note).
    """
    for record in records:
        for tracker in TRACKERS:
            tracker.report_verdict(record, status, project_root, note, foreign)


def capsule_digest(run_dir: Path) -> str:
    """The sealed record's digest: sha256 of its `capsule.yaml` (which names every blob by hash)."""
    return "sha256:" + hashlib.sha256((run_dir / RECORD_NAME).read_bytes()).hexdigest()


# --------------------------------------------------------------------------- MLflow


class MLflowTracker(Tracker):
    """MLflow: its runs found by their `repro.run_id` tag, tagged with the capsule and the verdict."""

    tool = MLFLOW

    def fold(self, row: dict[str, Any], entries: Entries) -> None:
        key = (self.tool, str(row.get("tracking_uri") or row.get("run_id") or ""))
        entries.setdefault(key, {"tool": self.tool}).update({k: v for k, v in row.items() if v is not None})

    def store_files(self, record: Record) -> list[str]:
        from repro.integrations import mlflow as ml

        return [f for t in _mlflow(record) for f in ml.store_files(t)]

    def outside_stores(self, record: Record) -> list[str]:
        from repro.integrations import mlflow as ml

        return ml.outside_stores(record.results.trackers)

    def before_seal(self, record: Record, project_root: Path, note: Note, foreign: bool) -> None:
        for tracker in _mlflow(record):
            uri = _reachable(tracker, project_root, foreign, note)
            if uri is None:
                continue
            try:
                from repro.integrations import mlflow as ml

                tracker["runs"] = ml.find_runs(uri, record.id)
            except Exception as e:  # noqa: BLE001 - a tracker's trouble is a notice, never a failed run
                note(f"mlflow: could not find the runs of {tracker.get('tracking_uri')}: {e}")

    def after_seal(self, record: Record, sealed: Sealed, note: Note) -> None:
        root, foreign = sealed.project_root, sealed.foreign
        runs = [t for t in _mlflow(record) if t.get("runs") and _reachable(t, root, foreign, _quiet)]
        if not runs:
            if sealed.log_capsule:
                note("mlflow: no MLflow run was started inside this run; no capsule logged")
            return
        digest = capsule_digest(sealed.run_dir)
        with tempfile.TemporaryDirectory(prefix="repro-capsule-") as tmp:
            tar = (
                pack(record, sealed.blob_path, Path(tmp) / f"{record.id}.tar") if sealed.log_capsule else None
            )
            for tracker in runs:
                uri = _reachable(tracker, root, foreign, _quiet) or ""
                try:
                    from repro.integrations import mlflow as ml

                    ml.set_tags(uri, tracker["runs"], {"repro.capsule": digest})
                    if tar is not None:
                        ml.log_artifact(uri, tracker["runs"], tar)
                        shown = ", ".join(tracker["runs"])
                        note(f"mlflow: capsule logged to run {shown} (artifact repro/{tar.name})")
                except Exception as e:  # noqa: BLE001
                    note(f"mlflow: could not tag runs {', '.join(tracker['runs'])}: {e}")

    def report_verdict(
        self, record: Record, status: str, project_root: Path, note: Note, foreign: bool
    ) -> None:
        for tracker in _mlflow(record):
            if not tracker.get("runs"):
                continue
            if not foreign and tracker.get("path") and not (project_root / str(tracker["path"])).exists():
                continue  # the store is no longer there
            uri = _reachable(tracker, project_root, foreign, note)
            if uri is None:
                continue
            try:
                from repro.integrations import mlflow as ml

                absent = ml.set_tags(uri, tracker["runs"], {"repro.verdict": status})
                if absent:
                    note(
                        f"mlflow: run(s) {', '.join(absent)} of {record.id} are not in {shown_uri(uri)} "
                        "(recorded in another store); not tagged"
                    )
            except Exception as e:  # noqa: BLE001
                note(f"mlflow: could not tag runs {', '.join(tracker['runs'])} with the verdict: {e}")


# --------------------------------------------------------------------------- Weights & Biases

# W&B keeps each run in <dir>/wandb/run-<date>_<time>-<id>/ (offline-run-… in offline mode).
_WANDB_RUN = re.compile(
    r"^(?P<dir>(?:.*/)?wandb)/(?P<offline>offline-)?run-\d{8}_\d{6}-(?P<id>[A-Za-z0-9]+)/"
)


class WandbTracker(Tracker):
    """Weights & Biases: its runs named from the files it wrote; the run's image named to it."""

    tool = WANDB

    def environment(self, image: BuiltImage | None) -> dict[str, str]:
        """W&B records ``WANDB_DOCKER`` as the run's image."""
        return {"WANDB_DOCKER": image.id} if image is not None and image.id else {}

    def from_files(self, written: set[str]) -> list[dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for rel in sorted(written):
            match = _WANDB_RUN.match(rel)
            if match is None:
                continue
            entry = found.setdefault(match["dir"], {"tool": self.tool, "path": match["dir"], "runs": []})
            entry["mode"] = "offline" if match["offline"] else "online"
            if match["id"] not in entry["runs"]:
                entry["runs"].append(match["id"])
        return list(found.values())


TRACKERS: tuple[Tracker, ...] = (MLflowTracker(), WandbTracker())


# --------------------------------------------------------------------------- MLflow's tracking URIs


def _reachable(tracker: dict[str, Any], project_root: Path, foreign: bool, note: Note) -> str | None:
    """The URI to contact for a tracker entry, or None (said through ``note``): for a run from
    elsewhere, only this machine's ``MLFLOW_TRACKING_URI``, when the entry names that very URI."""
    from repro.integrations import mlflow as ml

    recorded = str(tracker.get("tracking_uri"))
    if foreign:
        host = ml.host_tracking_uri(configured_only=True)  # absolute, as a replay's runs record it
        if host and _normal(ml.absolute_uri(recorded, os.getcwd())) == _normal(host):
            return host
        note(
            f"mlflow: the record names tracking URI {shown_uri(recorded)}; not contacted (a run from "
            "elsewhere is tagged only through this machine's MLFLOW_TRACKING_URI)"
        )
        return None
    path = tracker.get("path")
    if path:  # a store inside the project (`mlruns`, `mlflow.db`) maps onto the host's copy
        return ml.host_uri(recorded, str(path), project_root)
    return recorded


def _quiet(_: str) -> None:
    return None


def _normal(uri: str) -> str:
    return uri.strip().rstrip("/")


def shown_uri(uri: str, limit: int = 120) -> str:
    """A URI as a note shows it: no user or password, control characters escaped, bounded."""
    try:
        parts = urlsplit(uri)
        netloc = parts.netloc.rpartition("@")[2]
        # Rebuilt only when it holds more than a place: `sqlite:///mlflow.db` stays as written.
        extra = "@" in parts.netloc or parts.query or parts.fragment
        text = urlunsplit((parts.scheme, netloc, parts.path, "", "")) if extra else uri
    except ValueError:
        text = "(unparseable)"
    text = re.sub(r"[\x00-\x1f\x7f]", "?", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _mlflow(record: Record) -> list[dict[str, Any]]:
    return [t for t in record.results.trackers if t.get("tool") == MLFLOW and t.get("tracking_uri")]
