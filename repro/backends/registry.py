"""The backends a run can execute on, and what each one owns; the one list every other module reads.

An `Entry` names a backend and says, for the rest of repro: what `--backend` tells of it, how to
make it (its module is imported only then: the docker SDK stays out of `repro --help`), its section
of repro.yaml (``<section>.<key>`` is the setting ``<section>_<key>``, checked by its own rule),
how a replay lays out a multi-node run on it, and whether it runs the code on this machine,
unsandboxed. `repro.config` (`BACKENDS`, the repro.yaml keys and their checks), the `--backend`
option, the pytest plugin, `repro.sandbox` and `repro.runner.select_backend` take them from here. A
backend's options (from the settings, into and back from its record) belong to the backend itself,
e.g. `repro.backends.slurm.options.SlurmOptions`.

Adding a backend touches about three files: its module (``backends/<name>.py``, a class with the
`repro.backends.base.Backend` protocol), its `Entry` here, and README.md; with a repro.yaml
section, also its fields in `repro.config.Settings`.

Standard library only at import (the pytest plugin reads the names before any test runs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from repro.backends.base import Event, OnEvent
from repro.backends.slurm import sbatch

if TYPE_CHECKING:
    from repro.backends.base import Backend

AUTO = "auto"  # not a backend: docker when it can run the command, else local

# A section's first problem: (its key, the message, a hint).
Problem = tuple[str, str, str]


def _local(options: object) -> Backend:
    from repro.backends.local import LocalBackend

    return LocalBackend()


def _docker(options: object) -> Backend:
    from repro.backends.docker.backend import DockerBackend

    return DockerBackend()


def _slurm(options: object) -> Backend:
    from repro.backends.slurm.backend import SlurmBackend
    from repro.backends.slurm.options import SlurmOptions

    return SlurmBackend(options if isinstance(options, SlurmOptions) else None)


@dataclass(frozen=True)
class Entry:
    """One backend, as the rest of repro knows it."""

    name: str
    summary: str  # what `--backend` says of it
    build: Callable[[object], Backend]  # its options (None: from its defaults) → the backend
    on_host: bool  # runs the code on this machine, unsandboxed (a capsule from elsewhere does not)
    spans_nodes: bool = False  # a replay keeps a multi-node run's nodes (elsewhere: ranks on one machine)
    section: str | None = None  # its part of repro.yaml
    keys: tuple[str, ...] = ()  # the section's keys: ``<section>.<key>`` is the setting ``<section>_<key>``
    check: Callable[[Mapping[str, object]], Problem | None] | None = None  # the section's values → a problem

    def make(self, options: object = None) -> Backend:
        """The backend, with ``options`` when it takes some (others ignore them)."""
        return self.build(options)

    def settings(self) -> dict[str, str]:
        """repro.yaml key → Settings field, for its section."""
        return {f"{self.section}.{key}": f"{self.section}_{key}" for key in self.keys} if self.section else {}


ENTRIES: tuple[Entry, ...] = (
    Entry("local", "this machine, in the current environment", _local, on_host=True),
    Entry("docker", "a container built from the run's lock", _docker, on_host=False),
    Entry(
        "slurm", "the Slurm cluster, through sbatch", _slurm, on_host=True, spans_nodes=True,
        section="slurm", keys=sbatch.FIELDS, check=sbatch.settings_problem,
    ),
)  # fmt: skip

NAMES: tuple[str, ...] = (AUTO, *(entry.name for entry in ENTRIES))
_BY_NAME = {entry.name: entry for entry in ENTRIES}


def get(name: str) -> Entry:
    """The backend called ``name`` (a name `config` has checked).

    Raises:
        KeyError: no such backend.
    """
    return _BY_NAME[name]


def spans_nodes(name: str) -> bool:
    """Whether a replay on backend ``name`` keeps a multi-node run's nodes (``auto``: it does not)."""
    entry = _BY_NAME.get(name)
    return entry is not None and entry.spans_nodes


def on_host() -> tuple[str, ...]:
    """The backends that run the code on this machine, unsandboxed."""
    return tuple(entry.name for entry in ENTRIES if entry.on_host)


def auto(on_event: OnEvent, need_lock: bool, base_image: str | None) -> str:
    """What `auto` means here: docker when an engine answers, the run declares dependencies to build an
    image from and the engine holds ``base_image`` (when one is named); else local, said in one line."""
    from repro.backends.docker import engine as docker  # the docker SDK is a dependency: no fallback

    if not docker.engine_available():
        on_event(
            Event("info", "backend auto → local (no Docker engine answers; start one, or set DOCKER_HOST)")
        )
        return "local"
    if not need_lock:
        on_event(Event("info", "backend auto → local: no declared dependencies to build an image from"))
        return "local"
    if base_image and not docker.has_image(base_image):
        on_event(Event("info", f"backend auto → local: the Docker engine has no base image {base_image} "
                               "(`repro base-image` makes one)"))  # fmt: skip
        return "local"
    return "docker"
