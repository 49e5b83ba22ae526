"""What a re-execution of a recorded run is asked for and what it gives back, the run a ref names
(its signature checked first), and how a re-execution says its conditions."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repro.backends.base import Event, OnEvent
from repro.errors import CapsuleInvalid, UsageError
from repro.facts.data import Drift
from repro.store import limits, signing
from repro.store.record import Record
from repro.store.runs import LoadedRun, Store, is_capsule_ref

if TYPE_CHECKING:
    from repro.compare.verdict import Verdict


@dataclass
class ReplayRequest:
    ref: str
    data_root: Path | None = None
    allow_data_drift: bool = False
    atol: float | None = None
    rtol: float | None = None
    allow_world_size_change: bool = False
    nproc_per_node: int | None = None
    from_checkpoint: str | None = None  # replay only a window after this recorded checkpoint
    steps: int | None = None  # … of this many optimizer steps (default: to the next checkpoint)
    spoil: str = ""  # a window whose restore is spoiled (`repro.runtime.spoil`): `diff --prove`'s rng factor
    network: bool = False  # the capsule's own `backend.network` is never obeyed
    trust: signing.Trust | None = None  # a capsule's signature, checked before anything is extracted
    env: tuple[str, ...] = ()  # recorded variables to set again beyond the safe set (`--env NAME`)
    max_data_size: int = limits.MAX_DATA_BYTES  # the most carried data placed (`--max-data-size`)
    ops: int | None = None  # `--ops`: record the op stream of this many optimizer steps, and explain
    ops_only: bool = False  # an execution for its op stream alone: it stops after those steps
    threads: int | None = None  # `--threads N`: another intra-op thread count than the recorded one
    # A run to execute instead of the one ``ref`` names, not in the store: a proof's experiment (run A
    # with some of its factors taken from run B; `repro.prove`).
    run: LoadedRun | None = None
    # What the execution took from another run, kept in its record's ``verification``; an execution
    # with it is a helper (hidden from `repro ls` and `latest`).
    taken: dict[str, Any] | None = None


@dataclass
class ReplayOutcome:
    original: Record
    replay: Record
    verdict: Verdict
    drift: Drift | None = None
    notes: list[str] = field(default_factory=list)


def say(note: str, notes: list[str], on_event: OnEvent) -> None:
    """Tell a condition of the replay now, and keep it for the verdict."""
    on_event(Event("info", note))
    notes.append(note)


def resolve_trusted(store: Store, ref: str, trust: signing.Trust | None, on_event: OnEvent) -> LoadedRun:
    """The run ``ref`` names; with ``trust``, a capsule file whose signature passes, checked before
    anything is extracted (reported through ``on_event``), and the same SHA256SUMS found again when it is.

    Raises:
        UsageError: ``trust`` for a ref that is not a capsule file.
        CapsuleInvalid: the signature fails ``trust``, or the file changed in between.
    """
    if trust is None:
        return store.resolve(ref)
    path = Path(ref)
    if not is_capsule_ref(ref):
        raise UsageError(
            f"--key and --require-signed check an exported capsule; {ref} is a run in the store",
            hint=f"replay the capsule file itself (`repro export {ref} --sign KEYFILE` makes one)",
        )
    seal = signing.check_capsule(path, trust)
    said = f"signed with key {seal.key_id}, signature checked" if seal.checked else "not signed"
    on_event(Event("info", f"{path.name}: {said}"))
    loaded = store.open_capsule(path)
    if loaded.sums_sha256 != seal.sums_sha256:
        raise CapsuleInvalid(f"{path.name} changed while it was being read", hint="replay it again")
    return loaded
