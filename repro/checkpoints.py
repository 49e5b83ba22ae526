"""The checkpoints of a run, host side: what the runtime recorded at each save, in the record and back.

The injected runtime (repro/runtime/resume.py) writes, for every checkpoint file a process
saves, ``rng/<sha256>.rank<R>.json`` in the run's runtime directory (and, in traced runs, a
copy of the file under ``ckpt/<sha256>``). ``collect`` folds those into
``ResultInfo.checkpoints`` with every state stored as a blob; ``seed_runtime`` writes the
states of a whole resume chain into a new run's runtime directory so the runtime finds them
when the resumed script loads its checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from repro.capsule import CheckpointInfo, Record
from repro.errors import NotFoundError

RNG_DIR = "rng"  # the runtime's names (repro/runtime/resume.py)
RING_DIR = "ring"
COPIES_DIR = "ckpt"
EVENTS = "resume-events.jsonl"
RESUME_TRACE = "rtrace"  # ResultInfo.logs names: rtrace.rank0, rtrace.rank1, …


def collect(record: Record, runtime: Path, put_file: Callable[[Path], str], max_bytes: int) -> None:
    """Fold the runtime's checkpoint states, resume events and resume traces into the record."""
    found: dict[str, CheckpointInfo] = {}
    for path in sorted((runtime / RNG_DIR).glob("*.rank*.json")):
        digest, _, rest = path.name.partition(".rank")
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        info = found.setdefault(digest, CheckpointInfo(path="", hash=digest, step=int(body.get("step", 0))))
        info.states[rest.removesuffix(".json")] = put_file(path)
        if body.get("path") and not info.path:
            info.path = str(body["path"])
    _fill_from_ring(found, runtime, put_file)
    for info in found.values():
        copy = runtime / COPIES_DIR / info.hash
        if copy.is_file():
            info.size = copy.stat().st_size
            if info.size <= max_bytes:
                info.blob = put_file(copy)
    record.results.checkpoints = sorted(found.values(), key=lambda c: (c.step, c.path, c.hash))
    for trace in sorted(runtime.glob(f"{RESUME_TRACE}.rank*.jsonl")):
        record.results.logs[trace.stem] = put_file(trace)
    for event in read_events(runtime):
        if event.get("event") == "missing":
            what = event.get("path") or event.get("stream", "?")
            reason = event.get("reason") or "no RNG state was recorded for it"
            record.warnings.append(
                f"rank {event.get('rank', 0)} loaded checkpoint {what} but {reason}: this resume is not exact"
            )


def _fill_from_ring(found: dict[str, CheckpointInfo], runtime: Path, put_file: Callable[[Path], str]) -> None:
    """A rank killed before it wrote its state of a checkpointed step: take it from its ring of steps."""
    ring: dict[tuple[str, int], Path] = {}
    for path in (runtime / RNG_DIR / RING_DIR).glob("rank*.json"):
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
            ring[(str(body["rank"]), int(body["step"]))] = path
        except (OSError, ValueError, KeyError, TypeError):
            continue
    ranks = {rank for rank, _ in ring}
    for info in found.values():
        for rank in sorted(ranks - set(info.states)):
            slot = ring.get((rank, info.step))
            if slot is not None:
                info.states[rank] = put_file(slot)


def loaded_paths(runtime: Path) -> set[str]:
    """Checkpoints a resumed run loaded (project-relative), restored or not."""
    return {str(e["path"]) for e in read_events(runtime) if e.get("path")}


def read_events(runtime: Path) -> list[dict[str, Any]]:
    path = runtime / EVENTS
    if not path.is_file():
        return []
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def seed_runtime(
    runtime: Path, checkpoints: list[CheckpointInfo], read_blob: Callable[[str], bytes | None]
) -> int:
    """Write recorded states where a resumed process looks for them; returns how many."""
    target = runtime / RNG_DIR
    target.mkdir(parents=True, exist_ok=True)
    written = 0
    for info in checkpoints:
        for rank, blob in info.states.items():
            raw = read_blob(blob)
            if raw is not None:
                (target / f"{info.hash}.rank{rank}.json").write_bytes(raw)
                written += 1
    return written


def find(record: Record, ref: str) -> CheckpointInfo:
    """A recorded checkpoint by path, hash (prefix) or optimizer step (``step:N``).

    Raises:
        NotFoundError: nothing matches, with the recorded ones as the hint.
    """
    items = record.results.checkpoints
    for info in items:
        if ref in (info.path, info.hash) or (ref.startswith("step:") and ref[5:] == str(info.step)):
            return info
    matches = [i for i in items if len(ref) >= 6 and i.hash.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    shown = ", ".join(f"{i.path or i.hash[:12]} (step {i.step})" for i in items[:8]) or "none"
    raise NotFoundError(
        f"run {record.id} recorded no checkpoint {ref!r}",
        hint=f"recorded checkpoints: {shown}",
    )
