"""The contract between the host and the runtime inside the training process, written once.

Standard library only: the host (runner, backends, replay) and the injected runtime both import it.
It holds the environment variables the host sets for the runtime, the names of the files the runtime
writes into ``$REPRO_RUNTIME_DIR``, the per-rank seed rule, the torch switches each mode sets, and the
one reader of ``metrics.jsonl``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal, get_args

# --------------------------------------------------------------------------- modes

Mode = Literal["strict", "gpu", "off"]
MODES: tuple[Mode, ...] = get_args(Mode)
DEFAULT_MODE: Mode = "strict"  # when neither --mode, REPRO_MODE nor repro.yaml says otherwise (and no --gpus)
PINNED_MODES: tuple[Mode, ...] = ("strict", "gpu")  # modes that pin threads and deterministic kernels

# --------------------------------------------------------------------------- environment

RUN_ID_ENV = "REPRO_RUN_ID"  # set: the process belongs to a repro run (the runtime boots)
RUNTIME_DIR_ENV = "REPRO_RUNTIME_DIR"  # where the runtime writes its files, as the process sees it
PROJECT_ROOT_ENV = "REPRO_PROJECT_ROOT"  # the project root as the process sees it
SEED_ENV = "REPRO_SEED"  # the run's master seed
MODE_ENV = "REPRO_MODE"  # the determinism mode (also the user's setting, README "Configuration")
THREADS_ENV = "REPRO_THREADS"  # torch's intra-op threads in a pinned mode
ALLOW_NONDETERMINISTIC_OPS_ENV = "REPRO_ALLOW_NONDETERMINISTIC_OPS"  # "1": such ops warn instead of failing
OUTPUTS_ENV = "REPRO_OUTPUTS"  # the declared output directories, os.pathsep-separated
DATA_ENV = "REPRO_DATA"  # the declared input data, relative to the project root, os.pathsep-separated
BOOT_PID_ENV = "REPRO_BOOT_PID"  # the first booted process; its children know they are not the main one
TRACE_ENV = "REPRO_TRACE"  # "1": parameter sums after every optimizer step (trace.jsonl)
KEEP_CHECKPOINTS_ENV = "REPRO_KEEP_CHECKPOINTS"  # bytes of checkpoints kept for exact resume (-1: all)
RESUMED_FROM_ENV = "REPRO_RESUMED_FROM"  # set: restore the recorded RNG states at checkpoint load
RESUME_TRACE_ENV = "REPRO_RESUME_TRACE"  # "1": what decides each optimizer step (rtrace.jsonl)
INTERRUPT_AT_STEP_ENV = "REPRO_INTERRUPT_AT_STEP"  # N: kill rank 0's process group after step N
STOP_AFTER_STEPS_ENV = "REPRO_STOP_AFTER_STEPS"  # K: end each process K steps after its restore
OPS_ENV = "REPRO_OPS"  # K: record the op stream of the first K optimizer steps (ops.jsonl)
OPS_STOP_ENV = "REPRO_OPS_STOP"  # "1": end the process once those K steps are recorded
DEFAULT_OPS_STEPS = 2  # K when neither --ops-steps nor ops_steps in repro.yaml says

# --------------------------------------------------------------------------- files in the runtime dir

METRICS_FILE = "metrics.jsonl"  # rank 0's series (other ranks: metrics.rank<N>.jsonl)
PARAMS_FILE = "params.json"
KNOBS_FILE = "knobs.json"  # the determinism knobs the runtime applied
STATE_FILE = "state.json"  # torch's determinism switches at exit, and those the script changed
ENV_FILE = "env.json"  # the interpreter, packages and devices the process saw
TRACE_FILE = "trace.jsonl"
DATA_ORDER_FILE = "dataorder.jsonl"  # per DataLoader batch: a running digest of the sample indices
OPS_FILE = "ops.jsonl"  # the op stream (repro.runtime.opstream); ranks: ops.rank<N>.jsonl


def ranked(name: str, rank: int | str) -> str:
    """A file's name for one torchrun rank: ``knobs.json`` → ``knobs.rank0.json``; ``"*"`` gives the glob.

    A process outside torchrun (rank < 0) writes the plain name.
    """
    if isinstance(rank, int) and rank < 0:
        return name
    stem, dot, suffix = name.partition(".")
    return f"{stem}.rank{rank}{dot}{suffix}"


def logged_file(name: str, rank: int) -> str:
    """Where a process logs metrics or params: rank 0 (or a single process) the plain name, the run's."""
    return name if rank <= 0 else ranked(name, rank)


MAX_JSON_DEPTH = 64  # nesting of any JSON repro reads from a run or a capsule; its own rows nest 4 deep


def parse_json(text: str | bytes) -> Any:
    """JSON that may come from a stranger (a capsule's streams, logs, lists, manifests): the one
    parser for it. Nesting is bounded, so every reader (and every walk after it) stays shallow.

    Raises:
        ValueError: not JSON, or nested deeper than `MAX_JSON_DEPTH` (malformed, never a
            RecursionError).
    """
    try:
        value = json.loads(text)
    except RecursionError as e:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from e
    if _deeper_than(value, MAX_JSON_DEPTH):
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def _deeper_than(value: Any, bound: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        if not children:
            continue
        if depth > bound:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def jsonl_rows(text: str, keep: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """The objects of a JSON-lines text that ``keep`` accepts, in order (metrics, traces, resume
    traces: every file of rows the runtime appends). Lines that are not such an object are skipped:
    a process killed mid-write leaves half a line."""
    rows: list[dict[str, Any]] = []
    for line in text.splitlines():
        try:
            row = parse_json(line)
        except ValueError:
            continue
        if isinstance(row, dict) and keep(row):
            rows.append(row)
    return rows


def metric_rows(text: str) -> list[dict[str, Any]]:
    """The rows of a ``metrics.jsonl`` text (objects with a ``name`` and a ``value``), in order."""
    return jsonl_rows(text, lambda row: "name" in row and "value" in row)


# --------------------------------------------------------------------------- seeds and knobs

# Knobs of a run that used torch.compile (repro.runtime.compiling): "compiled", "compiler" ("g++ 12.2.0",
# "none" when Inductor found no compiler), "inductor.<setting>" for each recorded Inductor setting, and
# "inductor_autotune_turned_off" (the autotune settings a pinned mode turned off).
INDUCTOR_KNOB_PREFIX = "inductor."
NO_COMPILER = "none"

SEED_SPACE = 2**32  # seeds wrap into 0..2**32-1, what NumPy and PYTHONHASHSEED accept


def rank_seed(master: int, rank: int) -> int:
    """The seed of one process: the master seed plus its rank (0 outside torchrun), modulo 2**32."""
    return (master + max(rank, 0)) % SEED_SPACE


def pins(mode: str) -> bool:
    """Whether a mode pins threads and deterministic kernels (strict, gpu) or leaves them (off)."""
    return mode in PINNED_MODES


def torch_switches(mode: str, threads: int, warn_only: bool) -> dict[str, Any]:
    """The torch switches the runtime sets in a mode, named as `repro.runtime.ledger.effective` reads
    them back; nothing in ``off`` mode."""
    if not pins(mode):
        return {}
    switches: dict[str, Any] = {
        "deterministic_algorithms": True,
        "deterministic_warn_only": warn_only,  # nondeterministic ops warn (counted) instead of failing
        "threads": threads,
        "interop_threads": 1,
        "cudnn_deterministic": True,
        "cudnn_benchmark": False,
    }
    if mode == "gpu":
        switches.update(cudnn_allow_tf32=False, matmul_allow_tf32=False)
    return switches
