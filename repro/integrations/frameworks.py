"""What Lightning and the Hugging Face Trainer decide about seeds and determinism, compared with
repro's own mode and seed, and reported to the runner (repro/runtime/links.py).

Imported inside the training process by the framework modules; torch only at call time.
"""

from __future__ import annotations

import os
from typing import Any

from repro.runtime import api, contract, links

FRAMEWORK = "framework"


def repro_seed() -> int | None:
    """This process's repro seed, or None outside a repro run."""
    return api.seed() if links.active() else None


def mode_conflict(framework: str, setting: str) -> str | None:
    """A warning when the framework left torch's deterministic algorithms other than repro's mode set them."""
    import torch

    mode = os.environ.get(contract.MODE_ENV, contract.DEFAULT_MODE)
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    if mode == "strict" and (not enabled or warn_only):
        state = "off" if not enabled else "warn-only"
        return (
            f"{framework} set deterministic algorithms {state} ({setting}), overriding repro's strict mode: "
            "this run is not bit-for-bit reproducible"
        )
    if mode == "gpu" and not enabled:
        return f"{framework} turned deterministic algorithms off ({setting}), overriding repro's gpu mode"
    return None


def seed_override(framework: str, seed: int | None, how: str) -> str | None:
    """A warning when the framework re-seeded with another seed than repro's."""
    ours = repro_seed()
    if seed is None or ours is None or seed == ours:
        return None
    return (
        f"{framework} re-seeded every RNG with {how}={seed} after repro seeded them with {ours}: "
        f"the run's randomness follows {seed}; pass repro.seed() to let repro's seed decide"
    )


def report(framework: str, facts: dict[str, Any], warnings: list[str | None]) -> None:
    """Tell the runner the framework's seed and settings, and what overrides repro."""
    import torch

    facts = dict(facts)
    facts["deterministic_algorithms"] = torch.are_deterministic_algorithms_enabled()
    links.note(FRAMEWORK, name=framework, warnings=[w for w in warnings if w], **facts)
