"""A backend's command-line flags as plain data: each flag, the `--help` heading they are listed
under, and how the values given reach the backend (a key of its repro.yaml section they set, or its
options for this run only).

A backend declares them in its own package and names them in its `repro.backends.registry.Entry`;
the CLI (`cli/options.py`) turns them into click options. Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

# What a flag takes: a text, a count (an integer ≥ 1), a switch (given or not), or an on/off pair
# (``--x/--no-x``: given on, given off, or not given).
Takes = Literal["text", "count", "switch", "on/off"]
Given = Mapping[str, Any]  # a flag's `Flag.key` → the value given, for the flags given


@dataclass(frozen=True)
class Flag:
    """One flag of a backend."""

    name: str  # "--nodes"; an on/off pair: "--requeue/--no-requeue"
    help: str
    takes: Takes = "text"
    choices: tuple[str, ...] = ()  # the values a text takes (none: any)
    metavar: str | None = None  # what `--help` shows for its value (None: its kind's)
    repeat: bool = False  # may be given several times (the values as a tuple)
    setting: str | None = None  # the key of its backend's repro.yaml section it sets; None: this run only

    @property
    def names(self) -> tuple[str, ...]:
        """The option strings it is given by: ``("--requeue", "--no-requeue")`` for an on/off pair."""
        return tuple(self.name.split("/"))

    @property
    def label(self) -> str:
        """How messages name it: ``--requeue`` for ``--requeue/--no-requeue``."""
        return self.name.split("/")[0]

    @property
    def key(self) -> str:
        """The name its value is given under: ``sbatch_arg`` for ``--sbatch-arg``."""
        return self.label.lstrip("-").replace("-", "_")

    def given(self, value: Any) -> bool:
        """Whether ``value`` (as the command line read it) says the flag was given."""
        return value not in (None, ()) and not (self.takes == "switch" and value is False)


def _unchanged(options: object, given: Given) -> object:
    return options


@dataclass(frozen=True)
class FlagSection:
    """A backend's flags, listed under ``title`` in `--help` (given with another backend: a usage error)."""

    title: str  # "Slurm options (with --backend slurm)"
    flags: tuple[Flag, ...]
    # its options (from the settings) and the values of its this-run-only flags given → its options
    options: Callable[[object, Given], object] = _unchanged
    detach: str | None = None  # the key of the switch that submits the run and returns at once

    def run_only(self, given: Given) -> dict[str, Any]:
        """The values given of the flags that set no setting (this run only)."""
        return {
            flag.key: given[flag.key] for flag in self.flags if flag.setting is None and flag.key in given
        }
