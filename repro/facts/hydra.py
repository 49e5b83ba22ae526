"""Hydra apps: a pinned output directory, a multirun split into one run per job, the composed config.

A Hydra app writes into ``outputs/<date>/<time>/`` (a single run) or
``multirun/<date>/<time>/<job>/`` (``-m``). Three rules make such runs replayable:

- the output directory is decided when the run is captured and passed as
  ``hydra.run.dir=…`` (unless the command sets it), so a replay writes to the same place;
- a multirun (``-m a=1,2 b=x,y``) becomes one repro run per job, each with its own
  process, seed, logs, outputs and record (``hydra.run.dir=<sweep dir>/<n>``), expanded with
  Hydra's own override parser;
- the pinned ``hydra.run.dir=…`` is repro's, not the user's: it is recorded apart from the command
  (``command.injected``), is no hyper-parameter, and is never a cause in a diff;
- what Hydra writes about itself (``.hydra/*.yaml``, the job's ``<name>.log``) holds absolute
  paths and clock times: it is kept as a log of the run, not compared as an output, and the
  composed ``.hydra/config.yaml`` becomes the run's parameters.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

import yaml

from repro.errors import UsageError
from repro.facts.command import flatten_config, hydra_override

RUN_DIR_KEY = "hydra.run.dir"
SWEEP_DIR_KEY = "hydra.sweep.dir"
MULTIRUN_FLAGS = ("-m", "--multirun")
CONFIG_NAME = ".hydra/config.yaml"
_IMPORTS = re.compile(r"^\s*(import hydra|from hydra\b)", re.M)


def is_hydra_app(script_text: str | None, args: list[str]) -> bool:
    """A script that imports Hydra, or a command that sets Hydra's own keys."""
    if script_text is not None and _IMPORTS.search(script_text):
        return True
    return any(a.lstrip("+~").startswith("hydra.") or a.startswith("hydra/") for a in args)


def _overrides(args: list[str]) -> dict[str, str]:
    """`key=value` overrides in argv (key as written, value as text)."""
    found: dict[str, str] = {}
    for arg in args:
        if hydra_override(arg) is not None and "=" in arg:
            key, _, value = arg.partition("=")
            found[key.lstrip("+")] = value
    return found


def static_prefix(path: str) -> str:
    """The part of a Hydra directory before its first interpolation (`runs/${now:…}` → `runs`)."""
    parts = PurePosixPath(path).parts
    static = list(itertools.takewhile(lambda p: "$" not in p and "{" not in p, parts))
    return PurePosixPath(*static).as_posix() if static else ""


def pin_run_dir(args: list[str], now: datetime) -> list[str]:
    """What repro appends to pin Hydra's default run directory (nothing when the command sets it)."""
    if RUN_DIR_KEY in _overrides(args):
        return []
    return [f"{RUN_DIR_KEY}=outputs/{now:%Y-%m-%d}/{now:%H-%M-%S}"]


def pinned_dir(injected: list[str]) -> str | None:
    """The run directory repro pinned for a run (from `CommandInfo.injected`), or None."""
    return _overrides(injected).get(RUN_DIR_KEY)


def output_root(args: list[str]) -> str | None:
    """The directory (relative to the working directory) Hydra writes a single run into."""
    value = _overrides(args).get(RUN_DIR_KEY)
    root = static_prefix(value) if value else "outputs"
    return root or None


@dataclass(frozen=True)
class Job:
    """One job of a multirun: the overrides it gets, and the run directory repro pins for it."""

    number: int
    overrides: list[str]
    injected: list[str]


def sweep_jobs(args: list[str], now: datetime) -> list[Job] | None:
    """A multirun's jobs, in Hydra's order (the last sweep varies fastest); None without `-m`.

    Raises:
        UsageError: a multirun while hydra-core is not installed, or an override Hydra rejects.
    """
    if not any(a in MULTIRUN_FLAGS for a in args):
        return None
    try:
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from hydra.errors import HydraException
    except ImportError as e:
        raise UsageError(
            "a Hydra multirun (-m) needs hydra-core installed where repro runs",
            hint="pip install 'repro-capsule[integrations]'  (or pip install hydra-core)",
        ) from e
    rest = [a for a in args if a not in MULTIRUN_FLAGS]
    candidates = [a for a in rest if hydra_override(a) is not None]
    try:
        parsed = OverridesParser.create().parse_overrides(candidates)
    except HydraException as e:
        raise UsageError(f"Hydra cannot parse the overrides: {e}") from e
    sweep_dir = _overrides(rest).get(SWEEP_DIR_KEY)
    base = static_prefix(sweep_dir) if sweep_dir else ""
    sweep_root = base or f"multirun/{now:%Y-%m-%d}/{now:%H-%M-%S}"
    choices: list[list[str]] = []
    for override in parsed:
        key = override.get_key_element()
        if override.is_sweep_override():
            choices.append([f"{key}={v}" for v in override.sweep_string_iterator()])
        elif override.key_or_group not in (SWEEP_DIR_KEY, RUN_DIR_KEY):
            choices.append([str(override.input_line)])
    return [
        Job(number, list(combination), [f"{RUN_DIR_KEY}={sweep_root}/{number}"])
        for number, combination in enumerate(itertools.product(*choices))
    ]


def job_argv(args: list[str], job: Job) -> list[str]:
    """A multirun job's script arguments as the user's: `-m` and every override replaced by the job's own."""
    kept = [a for a in args if a not in MULTIRUN_FLAGS and hydra_override(a) is None]
    return [*kept, *job.overrides]


def job_dirs(paths: list[str]) -> set[str]:
    """The Hydra job directories among output paths: those holding `.hydra/config.yaml`."""
    return {p[: -len(CONFIG_NAME) - 1] for p in paths if p.endswith("/" + CONFIG_NAME)}


def is_bookkeeping(rel: str, jobs: set[str]) -> bool:
    """Hydra's notes about itself: `<job>/.hydra/*` and the job's `<job>/<name>.log`."""
    path = PurePosixPath(rel)
    parent = path.parent.as_posix()
    if path.parent.name == ".hydra" and path.parent.parent.as_posix() in jobs:
        return True
    return path.suffix == ".log" and parent in jobs


def composed_params(config_text: str) -> dict[str, Any]:
    """The composed config (`.hydra/config.yaml`) as dotted parameters."""
    try:
        data = yaml.safe_load(config_text)
    except yaml.YAMLError:
        return {}
    return flatten_config(data) if isinstance(data, dict) else {}
