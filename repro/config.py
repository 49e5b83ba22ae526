"""repro.yaml / [tool.repro] / REPRO_* environment → one frozen Settings object.

Precedence: command-line flag > environment (REPRO_…) > repro.yaml (or pyproject's
[tool.repro]) > default. The core receives a Settings; nothing reads a global.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib
import yaml

from repro.errors import ConfigError

MODES = ("strict", "gpu", "off")
BACKENDS = ("auto", "local", "docker")
DEFAULT_BASE_IMAGE = "repro-base:bookworm"


@dataclass(frozen=True)
class Settings:
    backend: str = "auto"
    mode: str | None = None  # None: strict on CPU, gpu when --gpus is given
    threads: int = 1
    isa: str = "auto"  # auto | avx2 | avx512 | default | none
    seed: int | None = None
    data: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ("outputs",)
    base_image: str = DEFAULT_BASE_IMAGE
    requirements: str | None = None  # the file the lockfile is compiled from
    network: bool = False
    trace: bool = False  # record a per-step fingerprint of every parameter
    max_output_bytes: int = 256 * 1024 * 1024  # outputs larger than this are hashed, not stored
    max_code_file_bytes: int = 16 * 1024 * 1024
    max_checkpoint_bytes: int = 1024 * 1024 * 1024  # traced runs keep checkpoints up to this size
    secret_patterns: tuple[str, ...] = ()
    env_allow: tuple[str, ...] = ()

    def with_overrides(self, **flags: Any) -> Settings:
        """Apply command-line flags (None means "not given")."""
        given = {k: v for k, v in flags.items() if v is not None and v != ()}
        return _validated(dataclasses.replace(self, **given))


# repro.yaml keys → Settings fields (nested sections are flattened).
_YAML_KEYS: dict[str, str] = {
    "backend": "backend",
    "mode": "mode",
    "threads": "threads",
    "isa": "isa",
    "seed": "seed",
    "data": "data",
    "outputs": "outputs",
    "network": "network",
    "trace": "trace",
    "image.base": "base_image",
    "deps.requirements": "requirements",
    "store.max_output_bytes": "max_output_bytes",
    "store.max_code_file_bytes": "max_code_file_bytes",
    "store.max_checkpoint_bytes": "max_checkpoint_bytes",
    "secrets.patterns": "secret_patterns",
    "env.allow": "env_allow",
}

_ENV_KEYS: dict[str, str] = {
    "REPRO_BACKEND": "backend",
    "REPRO_MODE": "mode",
    "REPRO_THREADS": "threads",
    "REPRO_ISA": "isa",
    "REPRO_SEED_DEFAULT": "seed",
    "REPRO_BASE_IMAGE": "base_image",
}


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and not any(k == name for k in _YAML_KEYS):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


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
                return value.lower() in ("1", "true", "yes", "on")
            return bool(value)
        return None if value is None else str(value)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{source}: {name} has a bad value {value!r} ({e})") from e


def _validated(settings: Settings) -> Settings:
    if settings.backend not in BACKENDS:
        raise ConfigError(
            f"unknown backend {settings.backend!r}", hint=f"choose one of: {', '.join(BACKENDS)}"
        )
    if settings.mode is not None and settings.mode not in MODES:
        raise ConfigError(f"unknown mode {settings.mode!r}", hint=f"choose one of: {', '.join(MODES)}")
    if settings.threads < 1:
        raise ConfigError("threads must be at least 1")
    return settings


def read_project_file(root: Path) -> tuple[dict[str, Any], str] | None:
    """The raw repro section of repro.yaml, or of pyproject's [tool.repro], and its name.

    Raises:
        ConfigError: the file cannot be parsed.
    """
    yml = root / "repro.yaml"
    if yml.is_file():
        try:
            data = yaml.safe_load(yml.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"repro.yaml is not valid YAML: {e}") from e
        if not isinstance(data, dict):
            raise ConfigError("repro.yaml must be a mapping of settings")
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


def load(root: Path, environ: dict[str, str] | None = None) -> Settings:
    """Settings for the project at ``root``: defaults, then the project file, then REPRO_* vars.

    Raises:
        ConfigError: unknown keys (with a suggestion) or bad values.
    """
    values: dict[str, Any] = {}
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
            values[name] = _coerce(name, value, source)
    env = os.environ if environ is None else environ
    for var, name in _ENV_KEYS.items():
        if env.get(var):
            values[name] = _coerce(name, env[var], var)
    return _validated(Settings(**values))
