"""Every RNG state of this process as JSON-ready data: ``random``, NumPy's global state and every
``default_rng`` generator, torch's CPU generator and every CUDA device's, and the worker base seed
of each DataLoader iterator in the middle of its epoch; captured and put back.
"""

from __future__ import annotations

import base64
import random
import sys
from typing import Any

from repro.runtime import loaderseeds, resumestate

LOADERS = "dataloader"  # not a generator: the base seed of each DataLoader iterator mid-epoch


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def capture_states() -> dict[str, Any]:
    """Every RNG state of this process, as JSON-ready data."""
    version, internal, gauss = random.getstate()
    states: dict[str, Any] = {"python": [version, list(internal), gauss]}
    np = sys.modules.get("numpy")
    if np is not None and hasattr(np, "random"):
        name, keys, pos, has_gauss, cached = np.random.get_state()
        states["numpy"] = [name, [int(k) for k in keys], int(pos), int(has_gauss), float(cached)]
        states["numpy_generators"] = [g.bit_generator.state for g in resumestate.state["generators"]]
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_rng_state"):
        states["torch"] = _b64(bytes(torch.get_rng_state().tolist()))
        cuda = _cuda_states(torch)
        if cuda is not None:
            states["cuda"] = cuda
    loaders = loaderseeds.capture()
    if loaders:
        states[LOADERS] = loaders  # the worker seed of an epoch in progress (loaderseeds.py)
    return states


def _cuda_states(torch: Any) -> list[str] | None:
    """Every CUDA device's generator state, once CUDA is initialised (None before: nothing drew yet)."""
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_available() or not cuda.is_initialized():
        return None
    return [_b64(bytes(s.tolist())) for s in cuda.get_rng_state_all()]


def restore_states(states: dict[str, Any]) -> list[str]:
    """Put recorded states back; returns the streams restored (in order)."""
    done: list[str] = []
    if "python" in states:
        version, internal, gauss = states["python"]
        random.setstate((version, tuple(internal), gauss))
        done.append("python")
    np = sys.modules.get("numpy")
    if np is not None and "numpy" in states:
        name, keys, pos, has_gauss, cached = states["numpy"]
        np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
        done.append("numpy")
        recorded = states.get("numpy_generators", [])
        for generator, state in zip(resumestate.state["generators"], recorded, strict=False):
            generator.bit_generator.state = state
        resumestate.state["pending_generators"] = recorded  # generators the script creates after the load
        if recorded:
            done.append("numpy_generators")
    torch = sys.modules.get("torch")
    if torch is not None and "torch" in states:
        torch.set_rng_state(_byte_tensor(torch, states["torch"]))
        done.append("torch")
        if states.get("cuda") is not None:
            restore_cuda(torch, states["cuda"])
            done.append("cuda")
    if states.get(LOADERS):
        loaderseeds.restore(states[LOADERS])
        done.append(LOADERS)
    return done


def _byte_tensor(torch: Any, text: str) -> Any:
    return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8)


def restore_cuda(torch: Any, recorded: list[str]) -> None:
    """Restore each CUDA device's state; a device count that differs is reported, the common ones set."""
    cuda = torch.cuda
    if not cuda.is_available():
        resumestate.event("missing", stream="cuda", reason="no CUDA device in the resumed process")
        return
    count = cuda.device_count()
    if count != len(recorded):
        resumestate.event(
            "missing", stream="cuda", reason=f"{len(recorded)} CUDA device(s) recorded, {count} here"
        )
    for index, text in enumerate(recorded[:count]):
        cuda.set_rng_state(_byte_tensor(torch, text), index)
