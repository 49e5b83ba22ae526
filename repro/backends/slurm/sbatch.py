"""What may go into an sbatch allocation, and how a value is written into a batch script.

The one home of the shapes repro accepts for Slurm options, whatever their source (flags,
repro.yaml, a replayed record): partition and account names, time limits, node counts, and the
extra sbatch arguments, each ``--name=value`` (or a bare ``--name``) from a known list whose value
has that argument's shape. Nothing else reaches sbatch: an argument that could run or load
something (``--wrap``, ``--export``, ``--chdir``, ``--output``, ``--uid``, ``--container``…) is not on
the list. Every value written into an ``#SBATCH`` line is also quoted the way sbatch's own parser
reads quotes, so a path with a space or a ``#`` stays one value; a newline or other control
character never gets that far.

Pure: standard library only, so `repro.config` checks settings with it and the backend and the
exporter write with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MAX_NODES = 10_000
FIELDS = ("nodes", "partition", "time", "account", "sbatch_args", "requeue", "environment")
# What runs the command on the nodes: this interpreter (on a shared filesystem), or the run's image.
ENVIRONMENTS = ("python", "docker", "podman")  # what runs the command on the nodes
CONTAINERS = ("docker", "podman")  # the environments that run it in the run's image

_NAME = r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}"
_NAMES = rf"{_NAME}(?:,{_NAME}){{0,15}}"
_COUNT = r"[0-9]{1,6}"
_SIZE = r"[0-9]{1,9}[KMGTkmgt]?"
_GPUS = r"(?:[A-Za-z0-9_.-]{1,32}:)?[0-9]{1,4}"
_GRES = r"[A-Za-z0-9_.:-]{1,64}(?:,[A-Za-z0-9_.:-]{1,64}){0,7}"
_NODES = r"[A-Za-z0-9_.,\[\]-]{1,512}"
_FEATURES = r"[A-Za-z0-9_.,&|*\[\]()!:-]{1,256}"
_TIME = r"(?:[0-9]{1,5}-[0-9]{1,2}(?::[0-9]{1,2}){0,2}|[0-9]{1,7}(?::[0-9]{1,2}){0,2}|UNLIMITED|INFINITE)"

# The extra sbatch arguments repro passes: resource and placement asks, each with the shape of its
# value (None: a bare flag that takes no value).
SBATCH_ARGS: Mapping[str, str | None] = {
    "qos": _NAME, "reservation": _NAMES, "wckey": _NAME, "clusters": _NAMES,
    "mem": _SIZE, "mem-per-cpu": _SIZE, "mem-per-gpu": _SIZE, "tmp": _SIZE,
    "cpus-per-task": _COUNT, "cpus-per-gpu": _COUNT, "mincpus": _COUNT,
    "threads-per-core": _COUNT, "cores-per-socket": _COUNT, "sockets-per-node": _COUNT,
    "gres": _GRES, "gpus": _GPUS, "gpus-per-node": _GPUS, "gpus-per-task": _GPUS, "gpus-per-socket": _GPUS,
    "constraint": _FEATURES, "nodelist": _NODES, "exclude": _NODES, "licenses": _GRES,
    "nice": r"-?[0-9]{1,5}", "hint": r"compute_bound|memory_bound|multithread|nomultithread",
    "exclusive": r"user|mcs", "oversubscribe": None, "contiguous": None, "overcommit": None,
    "spread-job": None,
}  # fmt: skip
_FLAGS_WITH_OPTIONAL_VALUE = frozenset({"exclusive"})
_SHAPES = {"partition": _NAMES, "account": _NAME, "time": _TIME}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PLAIN = re.compile(r"[A-Za-z0-9_.,:/@%+=\[\]-]+")


def problem(field: str, value: object) -> str | None:
    """What is wrong with one Slurm option's value, in words; None when it has a known shape.

    ``field`` is ``partition``, ``account``, ``time``, ``nodes``, ``environment``, ``requeue`` or
    ``sbatch_args`` (a list of ``--name=value`` strings).
    """
    if value is None:
        return None
    if field == "nodes":
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_NODES:
            return f"nodes must be a whole number from 1 to {MAX_NODES}, not {_shown(value)}"
        return None
    if field == "requeue":
        return None if isinstance(value, bool) else f"requeue must be true or false, not {_shown(value)}"
    if field == "environment":
        ok = value in ENVIRONMENTS
        return None if ok else f"environment {_shown(value)} is not {', '.join(ENVIRONMENTS)}"
    if field == "sbatch_args":
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            return f"sbatch_args must be a list of --name=value arguments, not {_shown(value)}"
        return next((p for p in (sbatch_arg_problem(a) for a in value) if p), None)
    shape = _SHAPES.get(field)
    if shape is None:
        return f"unknown Slurm option {field!r}"
    if not isinstance(value, str):
        return f"{field} must be text, not {_shown(value)}"
    if _CONTROL.search(value):
        return f"{field} {_shown(value)} has a newline or another control character"
    if not re.fullmatch(shape, value, flags=re.IGNORECASE if field == "time" else 0):
        return f"{field} {_shown(value)} is not {_WHAT[field]}"
    return None


_WHAT = {
    "partition": "a partition name (letters, digits, _ . + -; several joined by commas)",
    "account": "an account name (letters, digits, _ . + -)",
    "time": "a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED)",
}


def sbatch_arg_problem(arg: object) -> str | None:
    """What is wrong with one extra sbatch argument; None when it is ``--name=value`` from the list."""
    if not isinstance(arg, str):
        return f"sbatch argument {_shown(arg)} is not text"
    if _CONTROL.search(arg):
        return f"sbatch argument {_shown(arg)} has a newline or another control character"
    name, eq, value = arg.partition("=")
    if not name.startswith("--"):
        return f"sbatch argument {_shown(arg)} is not of the form --name=value"
    key = name[2:]
    if key not in SBATCH_ARGS:
        return f"sbatch argument {name} is not one repro passes (known: {', '.join(sorted(SBATCH_ARGS))})"
    shape = SBATCH_ARGS[key]
    if shape is None or (not eq and key in _FLAGS_WITH_OPTIONAL_VALUE):
        return None if not eq else f"sbatch argument {name} takes no value"
    if not eq:
        return f"sbatch argument {name} needs a value ({name}=…)"
    if not re.fullmatch(shape, value):
        return f"sbatch argument {_shown(arg)} has a value of another shape"
    return None


def problems(options: Mapping[str, object]) -> list[str]:
    """Every problem of a set of options (field → value), in field order."""
    return [p for p in (problem(k, v) for k, v in options.items()) if p]


def settings_problem(section: Mapping[str, object]) -> tuple[str, str, str] | None:
    """The first problem of the ``slurm:`` settings (repro.yaml, flags) as (key, message, hint); None
    when every value has a shape repro passes to sbatch."""
    for key in ("nodes", "partition", "time", "account", "sbatch_args"):
        why = problem(key, section.get(key))
        if why:
            return key, f"Slurm: {why}", "see README: On a cluster, for the shapes repro passes to sbatch"
    environment = section.get("environment")
    if environment not in ENVIRONMENTS:
        return (
            "environment",
            f"unknown slurm.environment {environment!r}",
            f"choose one of: {', '.join(ENVIRONMENTS)}",
        )
    return None


def directive(flag: str, value: object | None = None) -> str:
    """One ``#SBATCH`` line: ``--flag=value``, the value double-quoted (sbatch's quoting) unless plain.

    Raises:
        ValueError: a value with a newline or another control character (never written).
    """
    if value is None:
        return f"#SBATCH --{flag}"
    text = str(value)
    if _CONTROL.search(text) or _CONTROL.search(flag):
        raise ValueError(f"--{flag} {_shown(text)} has a control character")
    if not _PLAIN.fullmatch(text):
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"#SBATCH --{flag}={text}"


def arg_directives(args: Iterable[str]) -> list[str]:
    """``#SBATCH`` lines for extra arguments already checked with `sbatch_arg_problem`."""
    lines = []
    for arg in args:
        name, eq, value = arg.partition("=")
        lines.append(directive(name[2:], value if eq else None))
    return lines


def _shown(value: object) -> str:
    """A value as an error message may show it: control characters escaped, at most 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
