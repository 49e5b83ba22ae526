"""`repro replay`: restore a capsule's code, check its data, re-execute, compare → a Verdict.

The replay is itself a run (kind "replay", parent = the original), sealed in the store,
so `repro diff ORIGINAL REPLAY` works afterwards. The parts it shares with `repro check` and
`repro resume` are in `repro.rerun`.
"""

from __future__ import annotations

from repro.backends.base import OnEvent
from repro.config import Plan
from repro.rerun.request import ReplayOutcome, ReplayRequest
from repro.rerun.verify import verify_run
from repro.store.runs import Store


def run_replay(request: ReplayRequest, store: Store, plan: Plan, on_event: OnEvent) -> ReplayOutcome:
    """Replay a run with its recorded code and compare it with its record (`verify_run`).

    Raises:
        DataDrift, UsageError, BackendUnavailable, CapsuleInvalid: see `verify_run`.
    """
    return verify_run(request, store, plan, on_event, kind="replay")
