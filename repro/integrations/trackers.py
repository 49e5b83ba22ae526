"""Tracker runs and framework settings the training process reported (repro/runtime/links.py),
folded into the record; tags added to the linked MLflow runs once the record is sealed.

Trouble with a tracker never fails a run: it becomes a notice. Tools are imported only when a
run actually used them.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from repro import produced
from repro.backends.base import BuiltImage
from repro.capsule import RECORD_NAME, Record, pack
from repro.runtime import links

Note = Callable[[str], None]
MLFLOW, WANDB, FRAMEWORK = "mlflow", "wandb", "framework"


def fold(record: Record, runtime_dir: Path) -> None:
    """Put what the process noted into the record: tracker runs, a framework's seed, its warnings."""
    trackers: dict[tuple[str, str], dict[str, Any]] = {}
    for row in noted(runtime_dir):
        kind = row.pop("kind")
        if kind == FRAMEWORK:
            name = str(row.pop("name", "framework"))
            for warning in row.pop("warnings", []) or []:
                record.warn("framework_override", str(warning))
            record.seeds.framework.setdefault(name, {}).update(row)
        elif kind == MLFLOW:
            key = (kind, str(row.get("tracking_uri") or row.get("run_id") or ""))
            trackers.setdefault(key, {"tool": kind}).update({k: v for k, v in row.items() if v is not None})
    record.results.trackers = list(trackers.values())


def noted(runtime_dir: Path) -> list[dict[str, Any]]:
    """Every fact the run's processes noted (``links*.jsonl``), rank 0's first; read as the run's
    own files are (`repro.produced`: a link is not followed)."""
    return [
        row
        for rel in produced.files(runtime_dir, f"{links.LINKS}*.jsonl")
        for row in produced.json_lines(runtime_dir, rel)
        if isinstance(row.get("kind"), str)
    ]


# W&B keeps each run in <dir>/wandb/run-<date>_<time>-<id>/ (offline-run-… in offline mode).
_WANDB_RUN = re.compile(
    r"^(?P<dir>(?:.*/)?wandb)/(?P<offline>offline-)?run-\d{8}_\d{6}-(?P<id>[A-Za-z0-9]+)/"
)


def find_wandb_runs(record: Record, written: set[str]) -> None:
    """Name the W&B runs the command started, from the files W&B wrote for them."""
    found: dict[str, dict[str, Any]] = {}
    for rel in sorted(written):
        match = _WANDB_RUN.match(rel)
        if match is None:
            continue
        entry = found.setdefault(match["dir"], {"tool": WANDB, "path": match["dir"], "runs": []})
        entry["mode"] = "offline" if match["offline"] else "online"
        if match["id"] not in entry["runs"]:
            entry["runs"].append(match["id"])
    record.results.trackers += list(found.values())


def image_environment(image: BuiltImage | None) -> dict[str, str]:
    """Variables that name the run's image to trackers: W&B records ``WANDB_DOCKER`` as the run's image."""
    return {"WANDB_DOCKER": image.id} if image is not None and image.id else {}


def link_mlflow_runs(record: Record, project_root: Path, note: Note) -> None:
    """Find the MLflow runs the process started (by their `repro.run_id` tag) and name them in the record."""
    for tracker in _mlflow(record):
        try:
            from repro.integrations import mlflow as ml

            uri = ml.host_uri(tracker["tracking_uri"], tracker.get("path"), project_root)
            tracker["runs"] = ml.find_runs(uri, record.id)
        except Exception as e:  # noqa: BLE001 - a tracker's trouble is a notice, never a failed run
            note(f"mlflow: could not find the runs of {tracker.get('tracking_uri')}: {e}")


def capsule_digest(run_dir: Path) -> str:
    """The sealed record's digest: sha256 of its `capsule.yaml` (which names every blob by hash)."""
    return "sha256:" + hashlib.sha256((run_dir / RECORD_NAME).read_bytes()).hexdigest()


def after_seal(
    record: Record, run_dir: Path, project_root: Path, blob_path: Callable[[str], Path],
    log_capsule: bool, note: Note,
) -> None:  # fmt: skip
    """Tag the linked MLflow runs with the capsule's digest; log the capsule file when asked."""
    runs = [t for t in _mlflow(record) if t.get("runs")]
    if not runs:
        if log_capsule:
            note("mlflow: no MLflow run was started inside this run; no capsule logged")
        return
    digest = capsule_digest(run_dir)
    with tempfile.TemporaryDirectory(prefix="repro-capsule-") as tmp:
        tar = pack(record, blob_path, Path(tmp) / f"{record.id}.tar") if log_capsule else None
        for tracker in runs:
            try:
                from repro.integrations import mlflow as ml

                uri = ml.host_uri(tracker["tracking_uri"], tracker.get("path"), project_root)
                ml.set_tags(uri, tracker["runs"], {"repro.capsule": digest})
                if tar is not None:
                    ml.log_artifact(uri, tracker["runs"], tar)
                    shown = ", ".join(tracker["runs"])
                    note(f"mlflow: capsule logged to run {shown} (artifact repro/{tar.name})")
            except Exception as e:  # noqa: BLE001
                note(f"mlflow: could not tag runs {', '.join(tracker['runs'])}: {e}")


def report_verdict(records: list[Record], status: str, project_root: Path, note: Note) -> None:
    """Tag every MLflow run linked to these records with `repro.verdict` (after a replay or check)."""
    for record in records:
        for tracker in _mlflow(record):
            if not tracker.get("runs"):
                continue
            try:
                from repro.integrations import mlflow as ml

                uri = ml.host_uri(tracker["tracking_uri"], tracker.get("path"), project_root)
                if tracker.get("path") and not (project_root / tracker["path"]).is_dir():
                    continue  # a replay's store lived in its scratch copy of the code
                ml.set_tags(uri, tracker["runs"], {"repro.verdict": status})
            except Exception as e:  # noqa: BLE001
                note(f"mlflow: could not tag runs {', '.join(tracker['runs'])} with the verdict: {e}")


def store_paths(record: Record) -> list[str]:
    """Project-relative directories where trackers keep their own files (`mlruns`, `wandb`).

    What a tracker writes there (run ids, clock times) is its bookkeeping: neither an output
    nor an undeclared input of the run.
    """
    return sorted({str(t["path"]) for t in record.results.trackers if t.get("path")})


def _mlflow(record: Record) -> list[dict[str, Any]]:
    return [t for t in record.results.trackers if t.get("tool") == MLFLOW and t.get("tracking_uri")]
