"""Secrets in files: credential files under any name, and the values of credential keys in configs.

- `credential_in_file` reads a whole file, streaming, for a private-key block or a cloud
  credential file (`rules.armour_in`): such a file never enters a code snapshot, whatever its name,
  suffix or size, and wherever in it the key sits.
- `config_secrets` parses a YAML, JSON, TOML or INI file and returns the values found under
  credential keys at any depth and in any layout: nested maps, lists under `credentials:`, block
  scalars, one-line JSON, values with commas, short keys (`pw`, `pwd`, `passwd`).
- `credential_at` names a tool's credential file by its path and content (`wandb/settings`, `kaggle.json`);
- `code_secrets` returns the string literals code gives to credential names (`SECRET_KEY = '…'`);
- `run_masker` builds the `Masker` for a run from its environment, command line and config files.
"""

from __future__ import annotations

import configparser
import json
import tomllib
from pathlib import Path
from typing import Any

import yaml

from repro.facts.secrets.mask import Masker
from repro.facts.secrets.redact import Redactor
from repro.facts.secrets.rules import (
    ARMOUR_SPAN,
    CODE_LITERAL,
    LOCATION_HEAD,
    MIN_SECRET,
    NameVerdict,
    armour_in,
    credential_location,
    hides_value,
    location_holds,
)

CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml", ".ini", ".cfg", ".conf")
_CHUNK = 1 << 20
MAX_CONFIG_BYTES = 4 << 20  # larger "configs" (a tokenizer's vocabulary) are data, not settings


def credential_in_file(path: str | Path) -> str | None:
    """What credential a file holds (`a private key`, `a cloud service-account file`), or None.

    The whole file is read in chunks that overlap by the longest span a rule needs, so a key after
    megabytes of other text is found as surely as one at the top.
    """
    tail = b""
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                found = armour_in(tail + chunk)
                if found is not None:
                    return found
                tail = chunk[-ARMOUR_SPAN:]
    except OSError:
        return None
    return None


def credential_at(path: str | Path, relpath: str) -> str | None:
    """What credential a file is by where it stands and what it says (`rules.CREDENTIAL_LOCATIONS`:
    `wandb/settings` with an `api_key`, `.kaggle/kaggle.json`, `.docker/config.json` with a login),
    whatever its suffix; None for a path no tool keeps a login at (the file is then not read)."""
    if not credential_location(relpath):
        return None
    try:
        with open(path, "rb") as f:
            head = f.read(LOCATION_HEAD)
    except OSError:
        return None
    return location_holds(relpath, head)


def code_secrets(text: str, redactor: Redactor) -> set[str]:
    """The string literals a code file gives to credential names (`rules.CODE_LITERAL`):
    `SECRET_KEY = '…'`, `wandb.login(key="<40 hex>")`; a value under an ambiguous name (`key=`)
    only when it looks like a key. Reading a credential (`os.environ["AWS_SECRET_ACCESS_KEY"]`)
    gives none."""
    found: set[str] = set()
    for m in CODE_LITERAL.finditer(text):
        value = m.group("value")
        if hides_value(redactor.classify(m.group("name").rsplit(".", 1)[-1]), value):
            found.add(value)
    return {v for v in found if len(v) >= MIN_SECRET}


def config_secrets(path: Path, redactor: Redactor | None = None) -> set[str]:
    """The values under credential keys in a config file (empty when it is not one, or unreadable)."""
    if not path.name.lower().endswith(CONFIG_SUFFIXES):
        return set()
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            return set()
        raw = path.read_bytes()
    except OSError:
        return set()
    return config_bytes_secrets(path.name, raw, redactor)


def config_bytes_secrets(name: str, raw: bytes, redactor: Redactor | None = None) -> set[str]:
    """`config_secrets` of a config file's bytes, read by the caller; ``name`` says whether it is one."""
    if not name.lower().endswith(CONFIG_SUFFIXES) or len(raw) > MAX_CONFIG_BYTES:
        return set()
    suffix = "." + name.rsplit(".", 1)[-1].lower()
    return config_text_secrets(raw.decode("utf-8", "replace"), suffix, redactor or Redactor())


def config_text_secrets(text: str, suffix: str, redactor: Redactor) -> set[str]:
    """`config_secrets` of a config's text; ``suffix`` says how to parse it (YAML when unsure)."""
    values: set[str] = set()
    for document in _parse(text, suffix):
        _walk(document, "plain", redactor, values)
    found: set[str] = set()
    for value in values:
        found |= _forms(value)
    return {v for v in found if len(v) >= MIN_SECRET}


def _parse(text: str, suffix: str) -> list[Any]:
    """The config's documents; a file that does not parse yields none (its shapes are still masked)."""
    try:
        if suffix == ".json":
            return [json.loads(text)]
        if suffix == ".toml":
            return [tomllib.loads(text)]
        if suffix in (".ini", ".cfg", ".conf"):
            parser = configparser.ConfigParser(interpolation=None, strict=False)
            parser.read_string(text)
            return [{name: dict(parser[name]) for name in parser.sections()} | {"": dict(parser.defaults())}]
        return [d for d in yaml.load_all(text, Loader=_Loader)]
    except (ValueError, yaml.YAMLError, configparser.Error, RecursionError):
        return []


class _Loader(yaml.SafeLoader):
    """Safe loading; unknown tags (`!include`, `!!python/...`) read as plain data, not errors."""


def _unknown_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)  # type: ignore[arg-type]


_Loader.add_multi_constructor("", _unknown_tag)


def _walk(node: Any, verdict: NameVerdict, redactor: Redactor, found: set[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            child = "secret" if verdict == "secret" else redactor.classify(str(key))
            _walk(value, child, redactor, found)
    elif isinstance(node, list):
        for item in node:
            _walk(item, verdict, redactor, found)
    elif hides_value(verdict, node):
        found.add(str(node))


def _forms(value: str) -> set[str]:
    """The ways a value shows in text: as is, JSON-escaped, and line by line (a block scalar is
    indented in the file, so only its lines appear verbatim)."""
    forms = {value, json.dumps(value)[1:-1]}
    forms |= {line.strip() for line in value.splitlines() if line.strip()}
    return forms


def run_masker(environ: dict[str, str], argv: list[str], configs: list[Path], redactor: Redactor) -> Masker:
    """The masker for a run: values under credential names and credential shapes in the environment
    and the command line, and the values under credential keys of the config files it names."""
    values = redactor.secret_values(environ, argv)
    for path in configs:
        values |= config_secrets(path, redactor)
    return Masker(values, redactor)
