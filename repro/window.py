"""`repro replay RUN --from CHECKPOINT [--steps K]`: re-execute a window of a long run and verify it.

The run must have been traced (`repro run --trace`): its per-step fingerprint trace is what
the window is compared with, and a traced run keeps each checkpoint's bytes in the store
(`store.max_checkpoint_bytes`). The replay puts the checkpoint back where the script saved
it, puts the RNG states recorded at that save where the runtime finds them, and runs the
recorded command as a resumed run: the script's "load if present" logic loads it, the
runtime restores the states, and every process stops after K optimizer steps. The
replay's trace rows 0..K-1 are the original's steps s..s+K-1 (s: the checkpoint's step).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from repro.backends.base import RunSpec
from repro.collect import checkpoints
from repro.compare.verdict import CompareOptions, Known, Side, Tolerance, Verdict, compare_runs
from repro.errors import UsageError
from repro.runtime import contract
from repro.store.record import CheckpointInfo, Record

STOP_ENV = contract.STOP_AFTER_STEPS_ENV


@dataclass
class Window:
    checkpoint: CheckpointInfo
    steps: int  # optimizer steps replayed after the checkpoint
    spoil: str = ""  # "rng": the restore at the checkpoint is spoiled on purpose (`repro.runtime.spoil`)

    @property
    def first(self) -> int:
        return self.checkpoint.step

    def describe(self) -> str:
        last = self.first + self.steps - 1
        spoiled = f", its restore spoiled ({self.spoil} not put back)" if self.spoil else ""
        where = self.checkpoint.path
        return f"window: optimizer steps {self.first}..{last}, from checkpoint {where}{spoiled}"


def choose(original: Record, ref: str, steps: int | None, trace_length: int) -> Window:
    """The checkpoint ``ref`` names and how many steps to replay after it (default: to the next one).

    Raises:
        UsageError: the run was not traced, or the checkpoint's bytes were not kept.
        NotFoundError: no such checkpoint.
    """
    if not trace_length:
        raise UsageError(
            f"run {original.id} has no per-step trace to compare a window with",
            hint="record long runs with `repro run --trace` (trace: true in repro.yaml)",
        )
    info = checkpoints.find(original, ref)
    if info.blob is None:
        raise UsageError(
            f"the bytes of checkpoint {info.path or info.hash[:12]} were not kept in the store",
            hint="traced runs keep checkpoints up to store.max_checkpoint_bytes, the oldest going first "
            "over store.max_bytes (repro.yaml); a later checkpoint of the run may still be kept",
        )
    if steps is None:
        later = [c.step for c in original.results.checkpoints if c.step > info.step]
        steps = (min(later) if later else trace_length) - info.step
    if steps < 1 or info.step >= trace_length:
        raise UsageError(f"checkpoint {info.path} (step {info.step}) leaves no optimizer step to replay")
    return Window(info, steps)


def prepare(
    window: Window, spec: RunSpec, original: Record, read_blob: Callable[[str], bytes | None]
) -> None:
    """Put the checkpoint and its RNG states in place, and tell the runtime to resume and stop."""
    info = window.checkpoint
    raw = read_blob(info.blob or "")
    if raw is None:
        raise UsageError(f"the bytes of checkpoint {info.path} are missing from the store")
    target = (spec.project_root / info.path).resolve()
    if not target.is_relative_to(spec.project_root.resolve()):
        raise UsageError(f"checkpoint path {info.path!r} leaves the project; it cannot be restored")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(raw)
    checkpoints.seed_runtime(spec.runtime_dir, [info], read_blob)
    spec.env.update({checkpoints.RESUMED_FROM_ENV: original.id, STOP_ENV: str(window.steps)})
    if window.spoil:
        spec.env[contract.RESUME_CONTROL_ENV] = window.spoil


def compare(original: Side, replay: Side, window: Window, mode: str, tol: Tolerance | None,
            options: CompareOptions | None, known: Known | None = None) -> Verdict:  # fmt: skip
    """The original's trace over the window against the replay's, renumbered; outputs and logs aside."""
    expected = [
        r for r in original.trace if window.first <= int(r.get("step", -1)) < window.first + window.steps
    ]
    got = [{**r, "step": int(r.get("step", 0)) + window.first} for r in replay.trace][: window.steps]
    a = dataclasses.replace(original, outputs=[], metrics=[], stdout="", trace=expected, data_order={})
    b = dataclasses.replace(replay, outputs=[], metrics=[], stdout="", trace=got, data_order={})
    verdict = compare_runs(a, b, mode, tol, options, known)
    verdict.notes.append(
        f"{len(got)} of the window's {len(expected)} steps compared by their parameter fingerprints"
    )
    return verdict
