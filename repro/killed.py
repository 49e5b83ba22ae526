"""A run killed with its repro process, found by its ref.

Light on purpose: `repro export` asks on every call, and only a ref that names such a run loads
the resume machinery that seals it (`repro.resume.salvage`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from repro.store.runs import Store


def unsealed(store: Store, ref: str) -> str | None:
    """The unsealed run a ref names: an id, a unique prefix, or `latest` when the newest is unsealed."""
    ids = store.run_ids()
    if ref == "latest":
        candidates = ids[-1:]
    else:
        candidates = [i for i in ids if i == ref] or [i for i in ids if i.startswith(ref)]
    if len(candidates) != 1 or store.has_record(candidates[0]):
        return None
    return candidates[0]


def dead(store: Store, ref: str) -> str | None:
    """The run ``ref`` names when it was never sealed, none of its processes runs and it left its
    pending record: one `repro resume`'s `salvage` seals as interrupted (what `repro export` does
    first, so that a killed run travels to be resumed elsewhere); None for any other ref."""
    found = unsealed(store, ref)
    if found is None or store.is_running(found) or store.load_pending(found) is None:
        return None
    return found
