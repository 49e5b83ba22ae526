"""The differences `repro diff` found, as factors an experiment can take from run B into run A, and
the one rule for taking each (`take`). A difference no re-execution can take is a factor too, with the
reason it cannot be swapped, so that a proof never passes over it in silence.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable

from repro.collect.checkpoints import SPOILED
from repro.diff.model import DiffResult
from repro.diff.proof import Factor
from repro.facts.command import swap_param
from repro.facts.determinism import with_threads
from repro.runtime import contract
from repro.store.record import DataInput, Record

# Differences of the machine a run ran on: a re-execution runs here, whatever either record says.
_MACHINE = ("software", "hardware", "world", "backend")
_COMMAND_WHY = {
    "argv": "the command line differs beyond its options (script or positional arguments)",
    "cwd": "the runs started in other directories",
    "nproc_per_node": "the world size differs (a process count is not swapped into one run)",
}
# The variables an ISA pin sets (`repro.facts.determinism.plan`).
_ISA_VARIABLES = (
    "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_CBWR", "OPENBLAS_CORETYPE",
)  # fmt: skip
_RECORDING = (contract.OPS_ENV, contract.OPS_STOP_ENV)
_DEPS_WHY = (
    "experiments re-execute in this machine's environment: B's packages need B's image, which a proof "
    "does not build"
)


def find_factors(diff: DiffResult, a: Record, b: Record, kept: Callable[[DataInput], bool]) -> list[Factor]:
    """The factors of the differences ``diff`` found between ``a`` and ``b``, in the diff's order.

    ``kept``: whether the files of one of B's declared inputs are at hand as blobs (the store, a
    capsule, the data remote), so that an experiment can place them.
    """
    found: list[Factor] = []
    found += _command(diff, a, b)
    found += _code(diff, a, b)
    found += _data(a, b, kept)
    if diff.section("dependencies").differs:
        found.append(Factor("dependencies", "dependencies", "A's lock", "B's lock", why_not=_DEPS_WHY))
    if any(c.scope == "seed" for c in diff.section("seeds").changes):
        found.append(Factor("seed", "seeds", a.seeds.master, b.seeds.master))
    found += _determinism(diff, a, b)
    found += _environment(diff)
    found += _resume(a, b)
    return found


# The ``rng`` factor: a resume that put back no RNG state (`repro.runtime.spoil`), taken by a windowed
# experiment, itself a resume from a checkpoint, whose restore is spoiled the same way.
RNG = "rng"
RNG_WHY = (
    "a resume's RNG states are taken only by windowed experiments (replays from a checkpoint): both runs "
    "need a per-step trace (repro run --trace) and a checkpoint kept in the store"
)


def _resume(a: Record, b: Record) -> list[Factor]:
    if resume_spoiled(a) == resume_spoiled(b):
        return []
    said = {True: "not restored at the resume", False: "restored"}
    why = RNG_WHY if resume_spoiled(b) else "run A resumed without its RNG states: no experiment does that"
    return [Factor(RNG, "resume", said[resume_spoiled(a)], said[resume_spoiled(b)], why_not=why)]


def resume_spoiled(r: Record) -> bool:
    """Whether ``r`` resumed with its RNG states deliberately not restored (its record says so)."""
    return any(w.code == "resume_not_exact" and SPOILED in w.message for w in r.warnings)


def _command(diff: DiffResult, a: Record, b: Record) -> list[Factor]:
    out: list[Factor] = []
    for c in diff.section("command").changes:
        if c.scope == "param":
            swapped = swap_param(a.command.argv, b.command.argv, c.key)
            why = None if swapped is not None else "not set on the command line (a config file or the script)"
            out.append(Factor(f"param:{c.key}", "command", c.old, c.new, why_not=why))
        elif c.scope == "config":
            out.append(
                Factor(f"config:{c.key}", "command", why_not="config files are not swapped one at a time")
            )
        elif c.scope == "argv":
            out.append(Factor(f"command:{c.key}", "command", c.old, c.new, why_not=_COMMAND_WHY.get(c.key)))
    return out


def _code(diff: DiffResult, a: Record, b: Record) -> list[Factor]:
    out: list[Factor] = []
    stored = {e.path: e.stored for e in b.code.files}
    have = {e.path for e in a.code.files}
    for c in diff.section("code").changes:
        if c.scope == "file":
            why = None
            if c.key in stored and not stored[c.key]:
                why = f"run B's {c.key} was not stored"
            elif c.key in have and c.key not in stored and c.key == _script(a):
                why = "the script itself is absent from run B"
            out.append(Factor(f"code:{c.key}", "code", c.old, c.new, why_not=why))
        elif c.scope in ("untracked", "patch"):
            out.append(Factor(f"code:{c.key}", "code", why_not="the runs recorded no file contents to swap"))
    if not out and diff.section("code").differs:
        out.append(Factor("code", "code", a.code.commit, b.code.commit,
                          why_not="the files that differ between the commits were not recorded"))  # fmt: skip
    return out


def _script(r: Record) -> str | None:
    return next((x for x in r.command.argv[1:] if x.endswith(".py")), None)


def _data(a: Record, b: Record, kept: Callable[[DataInput], bool]) -> list[Factor]:
    ia = {i.path: i for i in a.data.inputs}
    ib = {i.path: i for i in b.data.inputs}
    out: list[Factor] = []
    for path in sorted(set(ia) | set(ib)):
        x, y = ia.get(path), ib.get(path)
        if x is not None and y is not None and x.digest == y.digest:
            continue
        why = None
        if x is None or y is None:
            why = f"declared in run {'B' if x is None else 'A'} only"
        elif not kept(y):
            why = f"run B's copy of {path} is neither here as recorded nor kept (store, capsule, data remote)"
        out.append(Factor(f"data:{path}", "data", x.digest[:12] if x else None, y.digest[:12] if y else None,
                          why_not=why))  # fmt: skip
    return out


def _determinism(diff: DiffResult, a: Record, b: Record) -> list[Factor]:
    out: list[Factor] = []
    da, db = a.determinism, b.determinism
    changes = diff.section("determinism").changes
    own = ("threads", "isa")  # factors of their own, with the variables that pin them
    if any(c.scope in ("mode", "knob", "env") and c.key not in own and not _pins_threads_or_isa(c.key)
           for c in changes):  # fmt: skip
        out.append(Factor("mode", "determinism", da.mode, db.mode))
    if da.threads != db.threads:
        why = None if da.threads and db.threads else "a run in a mode that pins no thread count"
        out.append(Factor("threads", "determinism", da.threads, db.threads, why_not=why))
    if da.isa != db.isa:
        out.append(Factor("isa", "determinism", da.isa, db.isa))
    return out


def _environment(diff: DiffResult) -> list[Factor]:
    out: list[Factor] = []
    for c in diff.section("environment").changes:
        if c.scope == "variable":
            out.append(Factor(f"env:{c.key.lstrip('$')}", "environment", c.old, c.new))
        elif c.scope in _MACHINE:
            out.append(Factor(f"machine:{c.key}", "environment", c.old, c.new,
                              why_not="a fact of the machine it ran on: experiments run here"))  # fmt: skip
    return out


def hybrid(a: Record, b: Record, taken: Iterable[str]) -> Record:
    """Run A's record with the factors ``taken`` from run B: what an experiment executes.

    Raises:
        KeyError: a factor id no rule here takes (one `find_factors` marks as not swappable).
    """
    record = copy.deepcopy(a)
    for factor in taken:
        kind, _, key = factor.partition(":")
        _TAKE[kind](record, b, key)
    return record


def _param(record: Record, b: Record, key: str) -> None:
    argv = swap_param(record.command.argv, b.command.argv, key)
    if argv is None:
        raise KeyError(f"param:{key}")
    if record.command.launch:
        launch = swap_param(record.command.launch, b.command.argv, key)
        record.command.launch = launch or record.command.launch
    record.command.argv = argv
    if key in b.command.params:
        record.command.params[key] = b.command.params[key]
    else:
        record.command.params.pop(key, None)


def _code_file(record: Record, b: Record, path: str) -> None:
    theirs = [e for e in b.code.files if e.path == path]
    mine = [e for e in record.code.files if e.path != path]
    record.code.files = sorted(mine + theirs, key=lambda e: e.path)


def _data_input(record: Record, b: Record, path: str) -> None:
    theirs = next(i for i in b.data.inputs if i.path == path)
    record.data.inputs = [copy.deepcopy(theirs) if i.path == path else i for i in record.data.inputs]


def _seed(record: Record, b: Record, _: str) -> None:
    record.seeds.master = b.seeds.master
    record.seeds.pythonhashseed = b.seeds.pythonhashseed
    record.seeds.derived = dict(b.seeds.derived)
    record.seeds.per_rank = copy.deepcopy(b.seeds.per_rank)


def _mode(record: Record, b: Record, _: str) -> None:
    mine, theirs = record.determinism, b.determinism
    mine.mode = theirs.mode
    mine.knobs = {**{k: v for k, v in theirs.knobs.items() if k not in ("threads", "isa")},
                  **{k: v for k, v in mine.knobs.items() if k in ("threads", "isa")}}  # fmt: skip
    pinned = {k: v for k, v in mine.env.items() if _pins_threads_or_isa(k)}  # factors of their own
    mine.env = {**{k: v for k, v in theirs.env.items() if not _pins_threads_or_isa(k)}, **pinned}


def _pins_threads_or_isa(name: str) -> bool:
    """A variable that is no part of the ``mode`` factor: a pin of a factor of its own (threads, ISA),
    or one that only records (`--ops`: the op stream), never changing a result."""
    return name in _ISA_VARIABLES or name.endswith("_THREADS") or name in _RECORDING


def _threads(record: Record, b: Record, _: str) -> None:
    if b.determinism.threads is not None:
        record.determinism = with_threads(record.determinism, b.determinism.threads)


def _isa(record: Record, b: Record, _: str) -> None:
    """The ISA pin is the variables `repro.facts.determinism.plan` sets for it."""
    mine, theirs = record.determinism, b.determinism
    mine.isa = theirs.isa
    for name in _ISA_VARIABLES:
        if name in theirs.env:
            mine.env[name] = theirs.env[name]
        else:
            mine.env.pop(name, None)


def _variable(record: Record, b: Record, name: str) -> None:
    if name in b.env.variables:
        record.env.variables[name] = b.env.variables[name]
    else:
        record.env.variables.pop(name, None)


_TAKE: dict[str, Callable[[Record, Record, str], None]] = {
    "param": _param,
    "code": _code_file,
    "data": _data_input,
    "seed": _seed,
    "mode": _mode,
    "threads": _threads,
    "isa": _isa,
    "env": _variable,
    RNG: lambda record, b, _: None,  # the experiment's restore is spoiled by its request (`repro.prove`)
}
