"""The checkpoints of a run, host side: what the runtime recorded at each save, in the record and back.

The injected runtime (repro/runtime/ckptrecord.py) writes, for every checkpoint file a process
saves, ``rng/<sha256>.rank<R>.json`` in the run's runtime directory (and, in traced runs, a
copy of the file under ``ckpt/<sha256>``). ``collect`` folds those into
``ResultInfo.checkpoints`` with every state stored as a blob; ``seed_runtime`` writes the
states of a whole resume chain into a new run's runtime directory so the runtime finds them
when the resumed script loads its checkpoint.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from repro.collect import produced
from repro.errors import NotFoundError
from repro.runtime import contract
from repro.store import limits
from repro.store.record import CheckpointInfo, Record

RESUME_EVENTS = contract.STREAMS["resume_events"]  # resume-events.jsonl (repro/runtime/resumestate.py)
RESUMED_FROM_ENV = contract.RESUMED_FROM_ENV  # set: the runtime restores the recorded RNG states at load
RESUME_TRACE = contract.STREAMS["rtrace"]
# What a resume spoiled on purpose (`repro.runtime.spoil`) says in its record: the proof's ``rng`` factor.
SPOILED = (
    f"its RNG states were deliberately not restored at the resume ({contract.RESUME_CONTROL_ENV}=rng): "
    "this resume is not exact"
)


def collect(record: Record, runtime: Path, put_fd: Callable[[int], tuple[str, int]], max_bytes: int) -> None:
    """Fold the runtime's checkpoint states, resume events and resume traces into the record.

    They are the run's own files: read through `repro.collect.produced` (a link is never followed).
    """

    def put(rel: str, limit: int = produced.MAX_REPORT_BYTES) -> str | None:
        entry = produced.entry(runtime, rel, put_fd, limit)
        return entry.hash if entry is not None and entry.stored else None

    found: dict[str, CheckpointInfo] = {}
    for rel in produced.files(runtime, "*.rank*.json", contract.RNG_DIR):
        digest, _, rest = rel.rpartition("/")[2].partition(".rank")
        body = produced.read_json(runtime, rel)
        state = put(rel) if body else None
        if state is None:
            continue
        info = found.setdefault(digest, CheckpointInfo(path="", hash=digest, step=_int(body.get("step"))))
        info.states[rest.removesuffix(".json")] = state
        if body.get("path") and not info.path:
            info.path = str(body["path"])
    _fill_from_ring(found, runtime, put)
    for info in found.values():
        copy = produced.find(runtime, f"{contract.COPIES_DIR}/{info.hash}")
        if copy is not None and copy.kind == "file":
            info.size = copy.size
            info.blob = put(copy.rel, max_bytes)
    record.results.checkpoints = sorted(found.values(), key=lambda c: (c.step, c.path, c.hash))
    for rel in produced.files(runtime, RESUME_TRACE.glob()):
        rank = RESUME_TRACE.file_rank(rel)
        kept = put(rel) if rank is not None else None
        if rank is not None and kept is not None:
            record.results.logs[RESUME_TRACE.log_name(rank)] = kept
    _event_warnings(record, read_events(runtime))


def _event_warnings(record: Record, events: list[dict[str, Any]]) -> None:
    """What the resume events say is not exact, as the record's warnings: a checkpoint loaded without
    its states, a spoiled resume (`resume_not_exact`), Lightning's loop counters
    (`resume_lightning_loops`)."""
    lightning = False
    for event in events:
        if contract.row_kind(event) == "missing":
            what = event.get("path") or event.get("stream", "?")
            reason = event.get("reason") or "no RNG state was recorded for it"
            record.warn(
                "resume_not_exact",
                f"rank {event.get('rank', 0)} loaded checkpoint {what} but {reason}: "
                "this resume is not exact",
            )
        elif contract.row_kind(event) == "control":
            record.warn("resume_not_exact", f"rank {event.get('rank', 0)}: {SPOILED}")
        elif contract.row_kind(event) == "inexact" and event.get("state") == contract.LIGHTNING_LOOPS:
            lightning = True
    if lightning:
        exact = not any(w.code == "resume_not_exact" for w in record.warnings)
        record.warn("resume_lightning_loops", lightning_loops(exact))


def lightning_loops(exact: bool) -> str:
    """The one line a resumed Lightning fit says about the loop counters Lightning itself restores."""
    line = (
        "Lightning's own loop counters in its checkpoint files may differ: "
        "loops.fit_loop.epoch_loop.batch_progress.is_last_batch in the checkpoint saved at the end "
        "when the resumed epoch is the last, loops.fit_loop.epoch_progress.total.ready by 1 after a "
        "resume from an epoch's last batch"
    )
    return f"{line}; weights, optimizer and RNG are exact" if exact else line


STARTED_OVER_HINT = (
    "a script loads its checkpoint only when told to: run it with its resume flag "
    "(nanoGPT's --init_from=resume, a --resume PATH), or make it load the checkpoint when one exists"
)


def judge_resume(record: Record, runtime: Path, booted: bool) -> None:
    """A resumed run in which the runtime saw no checkpoint load started over: said in the record
    (``results.resume_started_over``, warning ``resume_started_over``). Not judged where the runtime
    never booted: then no load could be seen."""
    if record.resumed_from and booted and not any(e.get("path") for e in read_events(runtime)):
        record.results.resume_started_over = True
        record.warn("resume_started_over", started_over(record.resumed_from))


def started_over(original: str) -> str:
    """What a resume that loaded no checkpoint is, and the usual cause, in one line."""
    return (
        f"the resumed run loaded no checkpoint: it started over instead of continuing {original}; "
        + STARTED_OVER_HINT
    )


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _fill_from_ring(
    found: dict[str, CheckpointInfo], runtime: Path, put: Callable[[str], str | None]
) -> None:
    """A rank killed before it wrote its state of a checkpointed step: take it from its ring of steps."""
    ring: dict[tuple[str, int], str] = {}
    for rel in produced.files(runtime, "rank*.json", f"{contract.RNG_DIR}/{contract.RING_DIR}"):
        body = produced.read_json(runtime, rel)
        try:
            ring[(str(body["rank"]), int(body["step"]))] = rel
        except (KeyError, TypeError, ValueError):
            continue
    ranks = {rank for rank, _ in ring}
    for info in found.values():
        for rank in sorted(ranks - set(info.states)):
            slot = ring.get((rank, info.step))
            state = put(slot) if slot is not None else None
            if state is not None:
                info.states[rank] = state


def loaded_paths(runtime: Path) -> set[str]:
    """Checkpoints a resumed run loaded (project-relative), restored or not."""
    return {str(e["path"]) for e in read_events(runtime) if e.get("path")}


def restored(runtime: Path) -> list[dict[str, Any]]:
    """Each checkpoint a resumed process loaded with its recorded RNG states: rank, path and step."""
    return [
        {"rank": e.get("rank", 0), "path": e.get("path"), "step": e.get("step")}
        for e in read_events(runtime)
        if contract.row_kind(e) == "restored"
    ]


def read_events(runtime: Path) -> list[dict[str, Any]]:
    return produced.json_lines(runtime, RESUME_EVENTS.file, limits.MAX_RESUME_EVENTS_BYTES)


_PLAIN = re.compile(r"[0-9A-Za-z_-]{1,128}")  # a checkpoint hash as a file name: no `/`, no `..`


def seed_runtime(
    runtime: Path, checkpoints: list[CheckpointInfo], read_blob: Callable[[str], bytes | None]
) -> int:
    """Write recorded states where a resumed process looks for them; returns how many."""
    target = runtime / contract.RNG_DIR
    target.mkdir(parents=True, exist_ok=True)
    written = 0
    for info in checkpoints:
        for rank, blob in info.states.items():
            if not (_PLAIN.fullmatch(info.hash) and rank.isdigit()):
                continue  # a record naming another place than a file of the runtime dir
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
