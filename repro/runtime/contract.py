"""The contract between the host and the runtime inside the training process, written once.

Standard library only: the host (runner, backends, replay) and the injected runtime both import it.
It holds the environment variables the host sets for the runtime, the names of the files the runtime
writes into ``$REPRO_RUNTIME_DIR`` (every JSON-lines stream in `STREAMS`: file, log name, rank naming,
row kind), the per-rank seed rule, the torch switches each mode sets, and the one reader of
``metrics.jsonl``. A stream whose rows are of several kinds names a row's kind under ``"kind"``
(`ROW_KIND`); ``"e"`` and ``"event"`` before that was one key, still read (`row_kind`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain
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
RANK_LOGS = (
    "ranks"  # under the runtime dir: torchrun's per-rank stdout/stderr files (the launcher's --log-dir)
)
OUTPUTS_ENV = "REPRO_OUTPUTS"  # the declared output directories, os.pathsep-separated
DATA_ENV = "REPRO_DATA"  # the declared input data, relative to the project root, os.pathsep-separated
BOOT_PID_ENV = "REPRO_BOOT_PID"  # the first booted process; its children know they are not the main one
TRACE_ENV = "REPRO_TRACE"  # "1": parameter sums after every optimizer step (trace.jsonl)
KEEP_CHECKPOINTS_ENV = "REPRO_KEEP_CHECKPOINTS"  # bytes of checkpoints kept for exact resume (-1: all)
RESUMED_FROM_ENV = "REPRO_RESUMED_FROM"  # set: restore the recorded RNG states at checkpoint load
ATTEMPT_ENV = "REPRO_ATTEMPT"  # which start of a requeued job (0: the first); two starts never write at once
RESUME_TRACE_ENV = "REPRO_RESUME_TRACE"  # "1": what decides each optimizer step (rtrace.jsonl)
INTERRUPT_AT_STEP_ENV = "REPRO_INTERRUPT_AT_STEP"  # N: kill rank 0's process group after step N
LOADER_SEEDS_ENV = "REPRO_LOADER_SEEDS"  # "1": each DataLoader batch's worker seeded by its place
RESUME_CONTROL_ENV = "REPRO_RESUME_CONTROL"  # "rng": a resume spoiled on purpose (`check --control`)
STOP_AFTER_STEPS_ENV = "REPRO_STOP_AFTER_STEPS"  # K: end each process K steps after its restore
OPS_ENV = "REPRO_OPS"  # K: record the op stream of the first K optimizer steps (ops.jsonl)
OPS_STOP_ENV = "REPRO_OPS_STOP"  # "1": end the process once those K steps are recorded
DEFAULT_OPS_STEPS = 2  # K when neither --ops-steps nor ops_steps in repro.yaml says

# --------------------------------------------------------------------------- files in the runtime dir

PARAMS_FILE = "params.json"
KNOBS_FILE = "knobs.json"  # the determinism knobs the runtime applied
STATE_FILE = "state.json"  # torch's determinism switches at exit, and those the script changed
ENV_FILE = "env.json"  # the interpreter, packages and devices the process saw
RNG_DIR = "rng"  # RNG states at each checkpoint save: rng/<checkpoint>.rank<R>.json (runtime/ckptrecord.py)
RING_DIR = "ring"  # under rng/: each rank's states of its last optimizer steps (several ranks)
COPIES_DIR = "ckpt"  # copies of the checkpoints kept for an exact resume
MARKS_DIR = "marks"  # under rng/: which checkpoint each rank saved at which step
# A resume event ``inexact`` names, under "state", what a framework restores in its own way that repro's
# runtime leaves as it is: Lightning's loop counters in the checkpoints its resumed fit writes.
LIGHTNING_LOOPS = "lightning_loops"


# --------------------------------------------------------------------------- streams

# Every row of a stream whose rows are of several kinds names its kind under ROW_KIND ("kind"). Streams
# written before it was one key named it "e" (process reports) or "event" (resume events): readers
# accept those too (`row_kind`), so the streams of an older capsule or run are still read.
ROW_KIND = "kind"  # the one row key
OLD_ROW_KINDS = ("e", "event")

RankNaming = Literal["ranked", "logged", "numbered", "pid", "shared"]
# ranked:   NAME.jsonl outside torchrun, NAME.rank<R>.jsonl for every torchrun rank (`ranked`)
# logged:   NAME.jsonl for rank 0 or a single process, NAME.rank<R>.jsonl for ranks > 0 (`logged_file`)
# numbered: NAME.rank<R>.jsonl always, rank 0 outside torchrun
# pid:      one file a process: PREFIX<pid>.jsonl
# shared:   one file every process appends to, the rank in each row


@dataclass(frozen=True)
class Stream:
    """One JSON-lines stream the runtime appends to in ``$REPRO_RUNTIME_DIR``."""

    file: str  # its file's name (outside torchrun; for "pid" naming, the prefix before the pid)
    log: str  # its name among a record's logs (rank 0's or the single process's)
    ranks: RankNaming
    kinds: bool  # whether its rows carry ROW_KIND
    logs_as_file: bool = False  # among a record's logs: as its file (dataorder.rank0); else rank 0's plain

    def name(self, rank: int, pid: int = 0) -> str:
        """The file one process writes (``rank`` -1: not a torchrun rank)."""
        if self.ranks == "ranked":
            return ranked(self.file, rank)
        if self.ranks == "logged":
            return logged_file(self.file, rank)
        if self.ranks == "numbered":
            return ranked(self.file, max(rank, 0))
        if self.ranks == "pid":
            return f"{self.file}{pid}.jsonl"
        return self.file

    def glob(self) -> str:
        """A pattern for every file of the stream (every rank's, every process's)."""
        if self.ranks == "pid":
            return f"{self.file}*.jsonl"
        return ranked(self.file, "*") if self.ranks != "shared" else self.file

    def log_name(self, rank: int) -> str:
        """Its name among a record's logs for one rank: its file's name without ``.jsonl``
        (`logs_as_file`), else the plain name for rank 0 or no rank."""
        if self.logs_as_file:
            return self.name(rank).removesuffix(".jsonl")
        return self.log if rank <= 0 else f"{self.log}.rank{rank}"

    def file_rank(self, name: str) -> int | None:
        """The rank whose file ``name`` is (-1: a process outside torchrun); None: no file of this
        stream's (a pid-named stream's files carry no rank)."""
        _, sep, rest = name.rpartition(".rank")
        digits = rest.split(".")[0]
        rank = int(digits) if sep and digits.isdigit() else -1
        return rank if self.ranks != "pid" and self.name(rank) == name else None

    def log_rank(self, name: str) -> int | None:
        """The rank whose stream a log name holds (-1: the only process's); None: not this stream's."""
        if name == self.log:
            return -1 if self.logs_as_file else 0
        head, _, rank = name.partition(".rank")
        return int(rank) if head == self.log and rank.isdigit() else None


STREAMS: dict[str, Stream] = {
    "trace": Stream("trace.jsonl", "trace", "ranked", kinds=False),  # parameter sums after each step
    "ops": Stream("ops.jsonl", "ops", "ranked", kinds=False),  # the op stream of --ops
    "dataorder": Stream("dataorder.jsonl", "dataorder", "ranked", False, True),  # each DataLoader batch
    "report": Stream("proc.", "proc", "pid", kinds=True),  # each process: boot, w, r, seed, nd, error
    "links": Stream("links.jsonl", "links", "logged", kinds=True),  # tracker runs, framework settings
    "metrics": Stream("metrics.jsonl", "metrics", "logged", kinds=False),  # repro.log_metric's series
    "rtrace": Stream("rtrace.jsonl", "rtrace", "numbered", False, True),  # what decides each step (check)
    "resume_events": Stream("resume-events.jsonl", "resume-events", "shared", kinds=True),  # restores
}

METRICS_FILE = STREAMS["metrics"].file  # rank 0's series (other ranks: metrics.rank<N>.jsonl)
TRACE_FILE = STREAMS["trace"].file
DATA_ORDER_FILE = STREAMS["dataorder"].file  # per DataLoader batch: a running digest of the sample indices
OPS_FILE = STREAMS["ops"].file  # the op stream (repro.runtime.opstream); ranks: ops.rank<N>.jsonl


def row_kind(row: dict[str, Any]) -> Any:
    """A row's kind: under the key a stream written before ROW_KIND used, else under ROW_KIND (rows
    written since carry ROW_KIND only, so a row with both keys is read as the older writer meant it)."""
    return next((row[k] for k in (*OLD_ROW_KINDS, ROW_KIND) if k in row), None)


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
    """Whether a container deeper than ``bound`` holds anything; walked a level at a time (one
    comprehension a level: a list of 5,000 rows costs a few milliseconds, not a loop each). A level
    whose items hold no container ends the walk after one pass in C over their types."""
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 1
    while level:
        if depth > bound:
            return any(level)
        below = chain.from_iterable(item.values() if isinstance(item, dict) else item for item in level)
        if not any(issubclass(kind, (dict, list)) for kind in set(map(type, below))):
            return False
        level = [
            c
            for item in level
            for c in (item.values() if isinstance(item, dict) else item)
            if isinstance(c, (dict, list))
        ]
        depth += 1
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
