"""The one place settings are resolved: flags, REPRO_* environment, repro.yaml → a frozen Plan.

Precedence: command-line flag > environment (REPRO_…) > repro.yaml (or pyproject's
[tool.repro]) > default. A replay (and `check --against`) adds what the record says
between the environment and the project file: a replay runs where its record ran unless
a flag or the environment says otherwise. Every command and the pytest fixture build a
`Plan` with `resolve` and hand it to the core; nothing reads a global, and no other
module merges a flag with a setting.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any, Literal, get_args

import yaml

from repro import ranges
from repro.backends import registry
from repro.backends.baseimage import DEFAULT_BASE_IMAGE as DEFAULT_BASE_IMAGE
from repro.collect.harvest import SOURCES, check_settings
from repro.compare.logmask import check_patterns
from repro.errors import ConfigError
from repro.facts.lockvariants import CUDA_INDEX
from repro.runtime import contract
from repro.runtime.contract import Mode

MODES = contract.MODES
BackendName = str  # what --backend and `backend:` accept: `repro.backends.registry.names()`, checked here
Isa = Literal["auto", "avx2", "avx512", "portable", "default", "none"]  # the CPU kernel pin (`isa:`)
ISAS: tuple[Isa, ...] = get_args(Isa)


@dataclass(frozen=True)
class Settings:
    backend: BackendName = "auto"
    mode: Mode | None = None  # None: strict on CPU, gpu when --gpus is given
    threads: int | None = None  # None: the CPUs the run may use (`repro.facts.cpus.default_threads`)
    isa: Isa = "auto"
    seed: int | None = None
    data: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ("outputs",)
    outputs_exclude: tuple[str, ...] = ()  # globs of files the run writes that are not outputs
    base_image: str = DEFAULT_BASE_IMAGE
    requirements: str | None = None  # the file the lockfile is compiled from (or a project lockfile)
    groups: tuple[str, ...] | None = None  # a project lockfile's groups/extras; None: its tool's default
    network: bool = False
    trace: bool = False  # record a per-step fingerprint of every parameter
    ops: bool = False  # record every tensor op's fingerprint over the first steps (repro.runtime.opstream)
    ops_steps: int = contract.DEFAULT_OPS_STEPS  # … over this many optimizer steps
    allow_nondeterministic_ops: bool = False  # strict/gpu: such ops warn (and are counted), not fail
    max_output_bytes: int = 256 * 1024 * 1024  # outputs larger than this are hashed, not stored
    max_code_file_bytes: int = 16 * 1024 * 1024
    # files the run read that are neither code nor declared data: kept up to this many bytes in all
    max_input_bytes: int = 256 * 1024 * 1024
    max_checkpoint_bytes: int = 1024 * 1024 * 1024  # traced runs keep checkpoints up to this size
    # a directory of content-addressed data blobs shared by projects (`export --with-data`, replay)
    data_remote: str | None = None
    max_bytes: int | None = None  # kept checkpoint copies and outputs in the store (repro/store/budget.py)
    secret_patterns: tuple[str, ...] = ()
    env_allow: tuple[str, ...] = ()
    compare_stdout: bool = True  # stdout counts in the verdict (timings masked)
    compare_mask: tuple[str, ...] = ()  # regexes masked in stdout lines before comparing
    compare_ignore_lines: tuple[str, ...] = ()  # regexes: stdout lines left out of the comparison
    # --backend slurm: the allocation asked of sbatch
    slurm_nodes: int = 1
    slurm_partition: str | None = None
    slurm_time: str | None = None  # sbatch --time, e.g. 00:30:00
    slurm_account: str | None = None
    slurm_sbatch_args: tuple[str, ...] = ()  # passed to sbatch as given
    slurm_requeue: bool = False
    slurm_environment: str = (
        "python"  # python: this interpreter on a shared filesystem; docker: the run's image
    )
    mlflow_log_capsule: bool = False  # log the exported capsule to the MLflow runs the command started
    metrics_from: tuple[str, ...] = SOURCES  # where series are harvested with no code change, by precedence
    metrics_patterns: tuple[str, ...] = ()  # regexes for stdout metric lines: named groups, `step` the step
    insecure_registries: tuple[str, ...] = ()  # registries (host:port or host) plain HTTP may be spoken to

    def section(self, backend: str) -> dict[str, Any]:
        """The values of a backend's repro.yaml section (`repro.backends.registry`), by key."""
        entry = registry.get(backend)
        return {key: getattr(self, f"{entry.section}_{key}") for key in entry.keys}

    # cuda.index: where the cuda lock and CUDA images take torch's CUDA wheels; None (`none`): only the
    # host's pip configuration
    cuda_index: str | None = CUDA_INDEX


# repro.yaml keys → Settings fields (nested sections are flattened).
_YAML_KEYS: dict[str, str] = {
    "backend": "backend",
    "mode": "mode",
    "threads": "threads",
    "isa": "isa",
    "seed": "seed",
    "data": "data",
    "outputs": "outputs",
    "outputs.dirs": "outputs",
    "outputs.exclude": "outputs_exclude",
    "network": "network",
    "trace": "trace",
    "ops": "ops",
    "ops_steps": "ops_steps",
    "allow_nondeterministic_ops": "allow_nondeterministic_ops",
    "image.base": "base_image",
    "deps.requirements": "requirements",
    "deps.groups": "groups",
    "store.max_output_bytes": "max_output_bytes",
    "store.max_code_file_bytes": "max_code_file_bytes",
    "store.max_input_bytes": "max_input_bytes",
    "store.max_checkpoint_bytes": "max_checkpoint_bytes",
    "store.data_remote": "data_remote",
    "store.max_bytes": "max_bytes",
    "secrets.patterns": "secret_patterns",
    "env.allow": "env_allow",
    "compare.stdout": "compare_stdout",
    "compare.mask": "compare_mask",
    "compare.ignore_lines": "compare_ignore_lines",
    "mlflow.log_capsule": "mlflow_log_capsule",
    **{key: name for entry in registry.ENTRIES for key, name in entry.settings().items()},  # slurm.*
    "metrics.from": "metrics_from",
    "metrics.patterns": "metrics_patterns",
    "cuda.index": "cuda_index",
    "registries.insecure": "insecure_registries",
}

_KEY_OF = {name: key for key, name in _YAML_KEYS.items()}  # a setting's name in repro.yaml

_ENV_KEYS: dict[str, str] = {
    "REPRO_BACKEND": "backend",
    contract.MODE_ENV: "mode",
    contract.THREADS_ENV: "threads",
    "REPRO_ISA": "isa",
    "REPRO_SEED_DEFAULT": "seed",
    "REPRO_BASE_IMAGE": "base_image",
    "REPRO_COMPARE_STDOUT": "compare_stdout",
    "REPRO_CUDA_INDEX": "cuda_index",
}


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _coerce(name: str, value: Any, source: str) -> Any:
    f = {f.name: f for f in dataclasses.fields(Settings)}[name]
    kind = str(f.type)
    try:
        if kind.startswith("tuple"):
            if isinstance(value, str):
                value = [v for v in value.split(",") if v]
            if not isinstance(value, (list, tuple)):
                raise TypeError("expected a list")
            return tuple(str(v) for v in value)
        if kind.startswith("int"):
            if value is None and "None" in kind:
                return None
            return int(value)
        if kind == "bool":
            if isinstance(value, str):
                if value.lower() not in _TRUE + _FALSE:
                    raise ValueError("expected true or false")
                return value.lower() in _TRUE
            if not isinstance(value, (bool, int)):
                raise TypeError("expected true or false")
            return bool(value)
        if isinstance(value, bool):  # YAML 1.1 reads an unquoted `mode: off` as false
            return "on" if value else "off"
        return None if value is None else str(value)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{source}: {name} has a bad value {value!r} ({e})") from e


_REGISTRY_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*)(:[0-9]{1,5})?")


def _validated(settings: Settings, sources: Mapping[str, str]) -> Settings:
    def origin(name: str) -> str:
        source = sources.get(name, "default")
        return "" if source == "default" else f" (from {source})"

    if settings.backend not in registry.names():
        raise ConfigError(
            f"unknown backend {settings.backend!r}{origin('backend')}",
            hint=f"choose one of: {', '.join(registry.names())}",
        )
    if settings.mode is not None and settings.mode not in MODES:
        raise ConfigError(
            f"unknown mode {settings.mode!r}{origin('mode')}", hint=f"choose one of: {', '.join(MODES)}"
        )
    if settings.isa not in ISAS:
        raise ConfigError(
            f"unknown isa {settings.isa!r}{origin('isa')}", hint=f"choose one of: {', '.join(ISAS)}"
        )
    for name, (bound, hint) in _BOUNDED.items():
        value = getattr(settings, name)
        why = None if value is None else bound.problem(value)
        if why:
            raise ConfigError(f"{_KEY_OF.get(name, name)} {why}{origin(name)}", hint=hint)
    check_patterns(settings.compare_mask, "compare.mask")
    check_patterns(settings.compare_ignore_lines, "compare.ignore_lines")
    for entry in registry.ENTRIES:  # each backend's own section (slurm:)
        found = entry.check(settings.section(entry.name)) if entry.check else None
        if found:
            key, why, hint = found
            raise ConfigError(f"{why}{origin(f'{entry.section}_{key}')}", hint=hint)
    check_settings(settings.metrics_from, settings.metrics_patterns)
    for host in settings.insecure_registries:
        if not _REGISTRY_HOST.fullmatch(host):
            raise ConfigError(
                f"registries.insecure: {host!r} is not a registry's host or host:port"
                f"{origin('insecure_registries')}",
                hint="name it as image references do, without a scheme: registry.lan:5000",
            )
    return _cuda_index(settings, origin("cuda_index"))


def _cuda_index(settings: Settings, origin: str) -> Settings:
    """cuda.index: `none` (only the host's pip configuration) becomes None; else an http(s) or file URL.

    Raises:
        ConfigError: anything else.
    """
    value = settings.cuda_index
    if value is None or value.strip().lower() in ("none", ""):
        return dataclasses.replace(settings, cuda_index=None)
    if not value.startswith(("https://", "http://", "file:")):
        raise ConfigError(
            f"cuda.index {value!r} is not a package index URL{origin}",
            hint=f"an index URL such as {CUDA_INDEX}, or `none` to use only the host's pip configuration",
        )
    return settings


# Numeric settings and their ranges (repro/ranges.py), each with the hint a bad value gets.
_BOUNDED: dict[str, tuple[ranges.Bound, str]] = {
    "seed": (ranges.SEED, "--seed N (or seed: in repro.yaml, REPRO_SEED_DEFAULT) with N in 0..4294967295"),
    "threads": (ranges.THREADS, "N in 1..1024, or leave it out: the CPUs the run may use (README: Threads)"),
    "slurm_nodes": (ranges.NODES, "--nodes N, or slurm.nodes in repro.yaml"),
    "max_output_bytes": (ranges.BYTES, "store.max_output_bytes in repro.yaml: a size in bytes"),
    "max_code_file_bytes": (ranges.BYTES, "store.max_code_file_bytes in repro.yaml: a size in bytes"),
    "max_checkpoint_bytes": (ranges.BYTES, "store.max_checkpoint_bytes in repro.yaml: a size in bytes"),
    "max_input_bytes": (ranges.BYTES, "store.max_input_bytes in repro.yaml: a size in bytes"),
    "ops_steps": (ranges.STEPS, "--ops-steps K (or ops_steps: in repro.yaml): optimizer steps, 1 or more"),
    "max_bytes": (ranges.BYTES, "store.max_bytes in repro.yaml: a size in bytes (none: no budget)"),
}


class Rank(IntEnum):
    """Where a value came from, lowest first: a later rank wins."""

    DEFAULT = 0
    FILE = 1  # repro.yaml or [tool.repro]; then tool files such as pytest's ini
    RECORDED = 2  # what a replayed record says
    ENV = 3  # REPRO_*
    FLAG = 4  # the command line, or the pytest fixture's arguments


@dataclass(frozen=True)
class Layer:
    """Values for some Settings fields from one kind of source, each with its source's name."""

    rank: Rank
    values: Mapping[str, tuple[Any, str]]  # field → (value, "repro.yaml" | "REPRO_MODE" | "--mode" | …)


@dataclass(frozen=True)
class Flags:
    """What a command line (or the pytest fixture's arguments) asked for; None or () means not given."""

    backend: str | None = None
    mode: str | None = None
    seed: int | None = None
    threads: int | None = None
    isa: str | None = None
    data: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    network: bool | None = None
    trace: bool | None = None
    ops: bool | None = None
    ops_steps: int | None = None
    allow_nondeterministic_ops: bool | None = None
    compare_stdout: bool | None = None  # replay and check only
    cuda_index: str | None = None
    gpus: str | None = None  # not a setting: given per run
    nproc_per_node: int | None = None  # not a setting: given per run

    def layer(self, label: str = "--{}") -> Layer:
        """The flags that were given, as the highest layer; ``label`` names each source."""
        given = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in _RUN_ONLY and getattr(self, f.name) not in (None, ())
        }
        return Layer(
            Rank.FLAG,
            {k: (_coerce(k, v, label), label.format(k.replace("_", "-"))) for k, v in given.items()},
        )


_RUN_ONLY = ("gpus", "nproc_per_node")


@dataclass(frozen=True)
class Plan:
    """Every setting a command runs with, resolved once; ``sources`` says where each came from."""

    layers: tuple[Layer, ...]
    gpus: str | None = None
    nproc_per_node: int = 1
    torchrun: bool = False  # launch through torchrun even for one process (--nproc-per-node 1)
    settings: Settings = field(init=False)
    sources: Mapping[str, str] = field(init=False)

    def __post_init__(self) -> None:
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for layer in sorted(self.layers, key=lambda layer: layer.rank):  # stable: later layers of a rank win
            for name, (value, source) in layer.values.items():
                values[name], sources[name] = value, source
        settings = _validated(Settings(**values), sources)
        _check_run_only(self.nproc_per_node, self.gpus)
        if settings.mode is None:  # strict on CPU, gpu when GPUs are given to the run
            settings = dataclasses.replace(settings, mode="gpu" if self.gpus else contract.DEFAULT_MODE)
            sources["mode"] = "--gpus" if self.gpus else "default"
        object.__setattr__(self, "settings", settings)
        object.__setattr__(self, "sources", sources)

    @property
    def mode(self) -> Mode:
        """The determinism mode: never None in a plan."""
        return self.settings.mode or contract.DEFAULT_MODE

    def source(self, name: str) -> str:
        """Where a setting's value came from: a flag, an environment variable, a file, the record, default."""
        return self.sources.get(name, "default")

    def over(self, layer: Layer) -> Plan:
        """This plan with one more layer (a record's values, a flag fixed after the first run)."""
        return dataclasses.replace(self, layers=(*self.layers, layer))

    def with_recorded(self, **values: Any) -> Plan:
        """What a record says, above the project file and below the environment and flags."""
        return self.over(Layer(Rank.RECORDED, {k: (v, "the record") for k, v in values.items()}))

    def with_seed(self, seed: int) -> Plan:
        """The same plan with this master seed, as if given on the command line (one check, one seed)."""
        return self.over(Layer(Rank.FLAG, {"seed": (seed, self.source("seed"))}))


def _check_run_only(nproc_per_node: int, gpus: str | None) -> None:
    """The per-run flags within their ranges.

    Raises:
        ConfigError: --nproc-per-node or --gpus out of range (exit 2).
    """
    why = ranges.NPROC.problem(nproc_per_node)
    if why:
        raise ConfigError(f"--nproc-per-node {why}", hint="--nproc-per-node N: processes on this node")
    why = None if gpus is None else ranges.gpus_problem(gpus)
    if why:
        raise ConfigError(f"--gpus {why}", hint="--gpus all, --gpus 2 or --gpus 0,1")


def read_project_file(root: Path) -> tuple[dict[str, Any], str] | None:
    """The raw repro section of repro.yaml, or of pyproject's [tool.repro], and its name.

    Raises:
        ConfigError: the file cannot be parsed.
    """
    yml = root / "repro.yaml"
    if yml.is_file():
        try:
            with yml.open(encoding="utf-8") as f:  # a named stream: errors say which file
                data = yaml.safe_load(f) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{yml} is not valid YAML: {_yaml_problem(e)}") from e
        except UnicodeDecodeError as e:
            raise ConfigError(f"{yml} is not UTF-8 text: {e.reason} at byte {e.start}") from e
        if not isinstance(data, dict):
            raise ConfigError(f"{yml} must be a mapping of settings")
        return data, "repro.yaml"
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            tool = tomllib.loads(pyproject.read_text()).get("tool", {}).get("repro")
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"pyproject.toml is not valid TOML: {e}") from e
        if isinstance(tool, dict):
            return tool, "pyproject.toml [tool.repro]"
    return None


def _yaml_problem(e: yaml.YAMLError) -> str:
    """``line 3, column 7: mapping values are not allowed here`` (one line, PyYAML's is several)."""
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or getattr(e, "context", None)
    if mark is None or problem is None:
        return " ".join(str(e).split())
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def file_layer(root: Path) -> Layer:
    """repro.yaml (or [tool.repro]) as a layer.

    Raises:
        ConfigError: unknown keys (with a suggestion), bad values, a file that does not parse.
    """
    values: dict[str, tuple[Any, str]] = {}
    found = read_project_file(root)
    if found:
        raw, source = found
        for key, value in _flatten(raw).items():
            if key not in _YAML_KEYS:
                close = difflib.get_close_matches(key, list(_YAML_KEYS), n=1)
                raise ConfigError(
                    f"{source}: unknown setting {key!r}",
                    hint=f"did you mean {close[0]!r}?"
                    if close
                    else f"known: {', '.join(sorted(_YAML_KEYS))}",
                )
            name = _YAML_KEYS[key]
            values[name] = (_coerce(name, value, source), source)
    return Layer(Rank.FILE, values)


def env_layer(environ: Mapping[str, str] | None = None) -> Layer:
    """The REPRO_* variables that are set, as a layer.

    Raises:
        ConfigError: a value of the wrong type.
    """
    env = os.environ if environ is None else environ
    return Layer(
        Rank.ENV,
        {name: (_coerce(name, env[var], var), var) for var, name in _ENV_KEYS.items() if env.get(var)},
    )


def resolve(
    root: Path,
    flags: Flags | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    extra: tuple[Layer, ...] = (),
    cwd: Path | None = None,
) -> Plan:
    """The plan for a command in the project at ``root``: flag > env > project file > default.

    ``extra`` adds layers such as the pytest ini's ``repro_backend`` (a file, ranked above repro.yaml).
    ``cwd`` is where the user stands: the paths flags give (--data, --outputs) are relative to it,
    and become relative to the project root here; those of repro.yaml are relative to the root.

    Raises:
        ConfigError: unknown keys (with a suggestion) or bad values, naming where they came from.
    """
    flags = flags or Flags()
    if cwd is not None:
        flags = dataclasses.replace(
            flags, data=_from_cwd(flags.data, cwd, root), outputs=_from_cwd(flags.outputs, cwd, root)
        )
    layers = (file_layer(root), *extra, env_layer(environ), flags.layer())
    return Plan(
        layers,
        gpus=flags.gpus,
        nproc_per_node=flags.nproc_per_node or 1,
        torchrun=flags.nproc_per_node is not None,
    )


def _from_cwd(paths: tuple[str, ...], cwd: Path, root: Path) -> tuple[str, ...]:
    """Paths given relative to ``cwd``, relative to the project ``root`` (normalised, not resolved:
    a link inside the project to data elsewhere stays a path inside it). A path that leaves the
    project stays absolute, so the check that refuses it names the place it points to."""
    anchored = []
    for given in paths:
        full = Path(os.path.normpath(cwd / given))
        anchored.append(full.relative_to(root).as_posix() or "." if full.is_relative_to(root) else str(full))
    return tuple(anchored)


def load(root: Path, environ: Mapping[str, str] | None = None) -> Settings:
    """Settings for the project at ``root`` with no flags: defaults, the project file, REPRO_* vars.

    Raises:
        ConfigError: unknown keys (with a suggestion) or bad values.
    """
    return resolve(root, environ=environ).settings
