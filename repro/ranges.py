"""The sane range of every number a run takes: one table, whatever brings the number.

A seed, a process or node count, a thread count, PYTHONHASHSEED: each comes from a flag, a
REPRO_* variable, repro.yaml or a record. The settings check them with this table (a bad value
is a usage error, exit 2, naming the flag or file), and so do the record rules of an untrusted
capsule (`capsule_rules`, exit 6 naming the field). Standard library only; no other module
states these numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from repro.runtime import contract

INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Bound:
    """An inclusive integer range and why it is that range."""

    low: int
    high: int
    why: str

    def problem(self, value: object) -> str | None:
        """Why ``value`` is not in range (None when it is)."""
        if not isinstance(value, int) or isinstance(value, bool):
            return f"must be a whole number, not {value!r}"
        if not self.low <= value <= self.high:
            return f"must be {self.low}..{self.high}, not {value} ({self.why})"
        return None


# The master seed seeds Python's `random`, numpy's legacy `np.random.seed` and torch alike, as given
# (rank r of a multi-process run uses (seed + r) mod 2**32). numpy's legacy seed takes 0..2**32-1,
# the narrowest of the three (torch takes up to 2**64-1), so that is the seed's range.
SEED = Bound(0, 2**32 - 1, "numpy's np.random.seed takes 0..2**32-1")
# What the interpreter accepts in PYTHONHASHSEED (besides "random").
PYTHONHASHSEED = Bound(0, 4_294_967_295, "what Python accepts in PYTHONHASHSEED")
# Processes of one node: 8 GPUs x 128 is already generous; each one is a Python interpreter.
NPROC = Bound(1, 1024, "processes on one node, each an interpreter")
# Nodes of one Slurm job: the largest clusters' jobs stay below this.
NODES = Bound(1, 4096, "nodes of one job")
WORLD = Bound(1, NPROC.high * NODES.high, "processes of one run: nodes x processes per node")
# Intra-op threads: the largest CPUs have 384 hardware threads.
THREADS = Bound(1, 1024, "intra-op threads of one process")
GPUS = Bound(1, 64, "GPUs of one machine")
RUNS = Bound(2, 100, "runs of one `repro check`")
INTERRUPTS = Bound(1, 100, "killed and resumed runs of one `repro check --interrupt`")
STEPS = Bound(1, INT64_MAX, "optimizer steps")
STEP = Bound(0, INT64_MAX, "optimizer steps taken")
BYTES = Bound(0, INT64_MAX, "a size in bytes")

# The environment variables that carry a thread count (set by a determinism mode, kept in records).
THREAD_VARIABLES = (
    contract.THREADS_ENV,
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)

_GPU_IDS = re.compile(r"^[A-Za-z0-9-]{1,64}(,[A-Za-z0-9-]{1,64}){0,63}$")


def number_text_problem(bound: Bound, text: object) -> str | None:
    """Why ``text`` (an environment variable's value) is not a number in ``bound``; None when it is."""
    if not isinstance(text, str) or not text.isdigit() or len(text) > 20:
        return f"must be a whole number, not {text!r}"
    return bound.problem(int(text))


def pythonhashseed_problem(text: object) -> str | None:
    """Why ``text`` is not a PYTHONHASHSEED value (``random`` or 0..4294967295); None when it is."""
    if text == "random":
        return None
    return number_text_problem(PYTHONHASHSEED, text)


def _gpu_id(part: str) -> bool:
    """A device index (``0``) or a device UUID (``GPU-3f…``, ``MIG-…``), as docker and CUDA name them."""
    return part.isdigit() or part.startswith(("GPU-", "MIG-"))


def gpus_problem(value: object) -> str | None:
    """Why ``value`` is not what --gpus takes (``all``, a count, or device ids ``0,1``); None when it is."""
    if value == "all":
        return None
    if isinstance(value, str) and value.isdigit():
        return number_text_problem(GPUS, value)
    if isinstance(value, str) and _GPU_IDS.match(value) and all(map(_gpu_id, value.split(","))):
        return None
    return f"must be all, a count 1..{GPUS.high} or device ids such as 0,1, not {value!r}"
