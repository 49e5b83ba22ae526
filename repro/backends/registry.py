"""The backends a run can execute on, and what each one owns; the one list every other module reads.

An `Entry` names a backend and says, for the rest of repro: what `--backend` tells of it, how to
make it (its module is imported only then: the docker SDK stays out of `repro --help`), its section
of repro.yaml (``<section>.<key>`` is the setting ``<section>_<key>``, checked by its own rule), its
options from that section and from a record it ran (Slurm's allocation), how a replay lays out a
multi-node run on it, whether it runs the code on this machine unsandboxed, runs it in place (this
interpreter's environment), wants the lock settled before it prepares (its image is built from it), its
lines in `repro show`, and its flags of `repro run` (plain data: `repro.backends.flags`).
`repro.config`, the `--backend` option, the pytest plugin, `repro.sandbox`,
the verbs and the renderers ask these questions here instead of comparing a backend's name.

Adding a backend touches about three files: its module (a class with the `repro.backends.base.Backend`
protocol), its `Entry` here, and README.md; with a repro.yaml section, also its fields in
`repro.config.Settings`. A plugin (or a test: `tests/added_backend.py`) adds one with `register`.

Standard library only at import (the pytest plugin reads the names before any test runs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repro.backends.base import Event, OnEvent
from repro.backends.flags import FlagSection
from repro.backends.slurm import sbatch
from repro.backends.slurm.flags import FLAGS as SLURM_FLAGS

if TYPE_CHECKING:
    from repro.backends.base import Backend
    from repro.store.record import Record

AUTO = "auto"  # not a backend: docker, else rootless podman, when it can run the command; else local

# A section's first problem: (its key, the message, a hint).
Problem = tuple[str, str, str]
Section = Mapping[str, Any]  # a backend's part of the settings (`Settings.section`)
Lines = list[tuple[str, str]]  # `repro show` lines: (label, text)


def _local(options: object) -> Backend:
    from repro.backends.local import LocalBackend

    return LocalBackend()


def _docker(options: object) -> Backend:
    from repro.backends.docker.backend import DockerBackend

    return DockerBackend()


def _podman(options: object) -> Backend:
    from repro.backends.podman.backend import PodmanBackend

    return PodmanBackend()


def _slurm(options: object) -> Backend:
    from repro.backends.slurm.backend import SlurmBackend
    from repro.backends.slurm.options import SlurmOptions

    return SlurmBackend(options if isinstance(options, SlurmOptions) else None)


def _docker_answers() -> bool:
    from repro.backends.docker.engine import engine_available

    return engine_available()


def _podman_usable() -> bool:
    from repro.backends.podman.service import usable

    return usable()


def _slurm_settings(section: Section) -> object:
    from repro.backends.slurm.options import SlurmOptions

    return SlurmOptions.from_settings(section)


def _slurm_recorded(record: Record) -> object:
    from repro.backends.slurm.options import SlurmOptions

    return SlurmOptions.recorded(record)


def _slurm_task_cpus(section: Section, per_node: int) -> int:
    from repro.backends.slurm.options import SlurmOptions

    return SlurmOptions.from_settings(section).task_cpus(per_node)


def _docker_save(record: Record, dest: Path) -> int:
    from repro.backends.docker.archive import save_image

    image = record.deps.image
    assert image is not None and image.id
    return save_image(image.id, image.tag, dest)


def _podman_save(record: Record, dest: Path) -> int:
    from repro.backends.podman.service import save_to

    image = record.deps.image
    assert image is not None and image.id
    return save_to(image.id, dest, image.tag)


def _slurm_save(record: Record, dest: Path) -> int:
    slurm = record.backend.details.get("slurm")
    options = slurm.get("options") if isinstance(slurm, dict) else None
    engine = options.get("environment") if isinstance(options, dict) else None
    return _podman_save(record, dest) if engine == "podman" else _docker_save(record, dest)


def _slurm_contained(options: object, box: str) -> object:
    from dataclasses import replace

    from repro.backends.slurm.options import SlurmOptions

    return replace(options if isinstance(options, SlurmOptions) else SlurmOptions(), environment=box)


def _slurm_shown(details: Mapping[str, Any]) -> Lines:
    from repro.backends.slurm.shown import slurm_lines

    slurm = details.get("slurm")
    return slurm_lines(slurm) if isinstance(slurm, dict) else []


def _none(_: object) -> None:
    return None


def _nothing(_: Mapping[str, Any]) -> Lines:
    return []


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
    in_place: bool = False  # runs the command as repro's child, in this interpreter's environment
    locks_first: bool = False  # the lock is settled before it prepares (its image's `ImageInputs` need it)
    sandbox: bool = False  # the container sandbox a run from elsewhere replays in
    options: Callable[[Section], object] = _none  # its section of the settings → its options
    recorded: Callable[[Record], object] = _none  # a record it ran → the options to ask for the same again
    interpreter_here: Callable[[Section], bool] = lambda section: False  # a new run's lock is this env's
    nodes: Callable[[Section], int] = lambda section: 1  # the nodes a new run spans
    shown: Callable[[Mapping[str, Any]], Lines] = _nothing  # its lines in `repro show`, from its details
    flags: FlagSection | None = None  # its flags of `repro run` (listed under their own heading)
    available: Callable[[], bool] = lambda: True  # whether it can run here now (a sandbox's engine)
    # Its options running a run from elsewhere in container sandbox <box> (a host backend's nodes running
    # the run's image); None: it cannot, and such a run runs unsandboxed on it, when the replayer says so.
    contained: Callable[[object, str], object] | None = None
    save_image: Callable[[Record, Path], int] = _docker_save  # its run's image into an archive; its size
    # The CPUs each node's task of its runs gets when they are not this machine's, from its settings and
    # the ranks a node (a Slurm job's --cpus-per-task); None: its runs use this machine's CPUs.
    task_cpus: Callable[[Section, int], int] | None = None

    def make(self, options: object = None) -> Backend:
        """The backend, with ``options`` when it takes some (others ignore them)."""
        return self.build(options)

    def settings(self) -> dict[str, str]:
        """repro.yaml key → Settings field, for its section."""
        return {f"{self.section}.{key}": f"{self.section}_{key}" for key in self.keys} if self.section else {}


ENTRIES: tuple[Entry, ...] = (
    Entry(
        "local", "this machine, in the current environment", _local, on_host=True, in_place=True,
        interpreter_here=lambda section: True,
    ),
    Entry(
        "docker", "a container built from the run's lock", _docker, on_host=False, locks_first=True,
        sandbox=True, available=_docker_answers,
    ),
    Entry(
        "podman", "a rootless Podman container built from the run's lock", _podman, on_host=False,
        locks_first=True, sandbox=True, available=_podman_usable, save_image=_podman_save,
    ),
    Entry(
        "slurm", "the Slurm cluster, through sbatch", _slurm, on_host=True, spans_nodes=True,
        section="slurm", keys=sbatch.FIELDS, check=sbatch.settings_problem, locks_first=True,
        options=_slurm_settings, recorded=_slurm_recorded, shown=_slurm_shown,
        interpreter_here=lambda section: section.get("environment") == "python",
        nodes=lambda section: int(section.get("nodes") or 1), flags=SLURM_FLAGS, contained=_slurm_contained,
        save_image=_slurm_save, task_cpus=_slurm_task_cpus,
    ),
)  # fmt: skip

_BY_NAME = {entry.name: entry for entry in ENTRIES}


def register(entry: Entry) -> None:
    """Add a backend (a plugin's, a test's) after the built-in ones; the settings, `--backend` and the
    runner accept it from then on.

    Raises:
        ValueError: a backend of that name is registered already, or the name is `auto`; a flag of
            another backend's name.
    """
    global ENTRIES
    if entry.name in _BY_NAME or entry.name == AUTO:
        raise ValueError(f"a backend named {entry.name!r} is registered already")
    taken = {name for e in ENTRIES if e.flags for flag in e.flags.flags for name in flag.names}
    if clash := [n for flag in (entry.flags.flags if entry.flags else ()) for n in flag.names if n in taken]:
        raise ValueError(f"backend {entry.name!r} declares flags another backend has: {', '.join(clash)}")
    ENTRIES = (*ENTRIES, entry)
    _BY_NAME[entry.name] = entry


def names() -> tuple[str, ...]:
    """What --backend and `backend:` accept: `auto`, then each registered backend."""
    return (AUTO, *(entry.name for entry in ENTRIES))


def find(name: str) -> Entry | None:
    """The backend called ``name``, or None (a record's backend unknown here, or `auto`)."""
    return _BY_NAME.get(name)


def in_place(name: str) -> bool:
    """Whether backend ``name`` runs the command in this interpreter's environment (`auto`: unknown, no)."""
    entry = _BY_NAME.get(name)
    return entry is not None and entry.in_place


def sandbox() -> str:
    """The backend a run from elsewhere replays in unless the replaying side names another sandbox:
    the first container sandbox."""
    return next(entry.name for entry in ENTRIES if entry.sandbox)


def sandbox_here() -> str:
    """The container sandbox a run from elsewhere replays in here: the first whose engine can run now
    (Docker, then rootless Podman), else the first (whose absence `repro.sandbox` then reports)."""
    boxes = [entry for entry in ENTRIES if entry.sandbox]
    return next((entry.name for entry in boxes if entry.available()), boxes[0].name)


def is_sandbox(name: str) -> bool:
    """Whether backend ``name`` is a container sandbox a run from elsewhere may replay in."""
    entry = _BY_NAME.get(name)
    return entry is not None and entry.sandbox


def available(name: str) -> bool:
    """Whether backend ``name`` can run here now (its engine answers); unknown names: no."""
    entry = _BY_NAME.get(name)
    return entry is not None and entry.available()


def section_owner(field: str) -> Entry | None:
    """The backend whose section of the settings holds the Settings field ``field``."""
    return next((entry for entry in ENTRIES if field in entry.settings().values()), None)


def _section(entry: Entry, section: Callable[[str], Section]) -> Section:
    return section(entry.section) if entry.section else {}


def options(name: str, section: Callable[[str], Section]) -> object:
    """The options backend ``name`` takes from the settings (``section`` reads one), None for none."""
    entry = _BY_NAME.get(name)
    return entry.options(_section(entry, section)) if entry is not None else None


def nodes(name: str, section: Callable[[str], Section]) -> int:
    """The nodes a new run on backend ``name`` spans (`auto`: one)."""
    entry = _BY_NAME.get(name)
    return entry.nodes(_section(entry, section)) if entry is not None else 1


def cpus_here(name: str) -> bool:
    """Whether a run on backend ``name`` uses this machine's CPUs (`auto`: local or a container here)."""
    entry = _BY_NAME.get(name)
    return entry is None or entry.task_cpus is None


def task_cpus(name: str, section: Callable[[str], Section], per_node: int) -> int | None:
    """The CPUs each node's task of a new run on backend ``name`` gets, with ``per_node`` ranks a node,
    where they are not this machine's (a Slurm job's); None: this machine's."""
    entry = _BY_NAME.get(name)
    if entry is None or entry.task_cpus is None:
        return None
    return entry.task_cpus(_section(entry, section), per_node)


def interpreter_here(name: str, section: Callable[[str], Section]) -> bool:
    """Whether backend ``name``, as the settings ask, runs the command with this interpreter (its lock
    is this environment's; `auto`: no)."""
    entry = _BY_NAME.get(name)
    return entry is not None and entry.interpreter_here(_section(entry, section))


def locks_first(name: str) -> bool:
    """Whether the run's lock is settled before backend ``name`` prepares (one unknown here: it is)."""
    entry = _BY_NAME.get(name)
    return entry is None or entry.locks_first


def recorded_options(name: str, record: Record, foreign: bool = False) -> object:
    """The options to run ``record`` on backend ``name`` as it ran (None: that backend takes none); a run
    from elsewhere (``foreign``) on a backend that can contain it: in the container sandbox here.

    Raises:
        CapsuleInvalid: recorded options of a shape the backend refuses (a forged record).
    """
    entry = _BY_NAME.get(name)
    if entry is None:
        return None
    options = entry.recorded(record)
    return entry.contained(options, sandbox_here()) if foreign and entry.contained else options


def save_image(record: Record, dest: Path) -> int:
    """Save the image ``record`` ran in, from the engine that holds it, as an archive at ``dest``; its size.

    Raises:
        BackendUnavailable: that engine is not usable here. NotFoundError: it lost the image.
    """
    entry = _BY_NAME.get(record.backend.name)
    return (entry.save_image if entry is not None else _docker_save)(record, dest)


def base_image_importer() -> tuple[Callable[[Path, str, list[str]], str], str]:
    """Where `repro base-image` puts the image it makes, and how it says so: Docker's engine, or this
    user's rootless Podman where the image is made without root (`baseimage.rootless`)."""
    from repro.backends import baseimage

    if baseimage.rootless():
        from repro.backends.podman.service import import_rootfs as into_podman

        return into_podman, "mmdebstrap, then podman import"
    from repro.backends.docker.build import import_rootfs as into_docker

    return into_docker, "debootstrap, then docker import"


def contains(name: str) -> bool:
    """Whether host backend ``name`` runs a run from elsewhere in the container sandbox (on its nodes)."""
    entry = _BY_NAME.get(name)
    return entry is not None and entry.contained is not None


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
    image from and the engine holds ``base_image`` (when one is named); else rootless podman on the same
    conditions; else local, said in one line."""
    from repro.backends.docker import engine as docker  # the docker SDK is a dependency: no fallback
    from repro.backends.podman import service as podman

    if not need_lock:
        on_event(Event("info", "backend auto → local: no declared dependencies to build an image from"))
        return "local"
    if not docker.engine_available():
        why = "no Docker engine answers (start one, or set DOCKER_HOST)"
    elif base_image and not docker.has_image(base_image):
        why = f"the Docker engine has no base image {base_image} (`repro base-image` makes one)"
    else:
        return "docker"
    if not podman.usable():
        on_event(Event("info", f"backend auto → local: {why}; no rootless Podman here"))
        return "local"
    if base_image and not podman.has_image(base_image):
        on_event(
            Event("info", f"backend auto → local: {why}; Podman's storage has no base image {base_image}")
        )
        return "local"
    on_event(Event("info", f"backend auto → podman: {why}"))
    return "podman"
