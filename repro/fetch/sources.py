"""Where dependency files come from: the indexes and find-links the host's pip configuration names.

The same sources ``pip download`` would use, read from ``pip config list`` (the merged
config files and ``PIP_*`` variables) with pip's precedence: a ``PIP_*`` variable over the
``[download]`` section over ``[global]``. Never from a lockfile or a capsule: a capsule
does not choose what the host contacts.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass, field

from repro.errors import BuildError
from repro.fetch.reach import is_local

PYPI = "https://pypi.org/simple/"
CONFIG_HINT = "check the host's pip configuration (`pip config list`, PIP_INDEX_URL, PIP_FIND_LINKS)"
_SECTIONS = ("global", "download", ":env:")  # pip's order: later wins
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Sources:
    """The package sources to read, in pip's order, and how to reach them."""

    indexes: tuple[str, ...] = (PYPI,)  # index-url then each extra-index-url; empty with no-index
    find_links: tuple[str, ...] = ()  # directories, file:// or http(s) pages of links
    cert: str | None = None  # a CA bundle for https
    client_cert: str | None = None
    trusted_hosts: tuple[str, ...] = field(default=())  # https certificates not checked for these
    timeout: float = 15.0  # seconds, pip's default

    def all(self) -> tuple[str, ...]:
        """Every source in the order to ask them: the ones on this machine first (the lock's digests
        decide which bytes are right, so the order only decides how fast), find-links before indexes."""
        ordered = (*self.find_links, *self.indexes)
        return tuple(s for s in ordered if is_local(s)) + tuple(s for s in ordered if not is_local(s))


def from_settings(values: dict[str, str]) -> Sources:
    """Sources from resolved pip settings (``index-url``, ``extra-index-url``, ``find-links``, …)."""
    no_index = values.get("no-index", "").strip().lower() in _TRUE
    index = values.get("index-url", "").strip() or PYPI
    extra = values.get("extra-index-url", "").split()
    links = values.get("find-links", "").split()
    return Sources(
        indexes=() if no_index else tuple(dict.fromkeys([index, *extra])),
        find_links=tuple(dict.fromkeys(links)),
        cert=values.get("cert") or None,
        client_cert=values.get("client-cert") or None,
        trusted_hosts=tuple(values.get("trusted-host", "").split()),
        timeout=_seconds(values.get("timeout") or values.get("default-timeout")),
    )


def _seconds(raw: str | None) -> float:
    try:
        return max(1.0, float(raw)) if raw else 15.0
    except ValueError:
        return 15.0


def parse_config_list(text: str) -> dict[str, str]:
    """``pip config list`` output (``section.key='value'`` lines) → {key: the value pip would use}."""
    by_section: dict[str, dict[str, str]] = {s: {} for s in _SECTIONS}
    for line in text.splitlines():
        name, sep, raw = line.partition("=")
        section, dot, key = name.rpartition(".")
        if not sep or not dot or section not in by_section:
            continue
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        by_section[section][key.strip().replace("_", "-")] = str(value)
    merged: dict[str, str] = {}
    for section in _SECTIONS:
        merged.update(by_section[section])
    return merged


def host_sources() -> Sources:
    """The sources the host's pip would download from.

    Raises:
        BuildError: pip's configuration cannot be read.
    """
    argv = [sys.executable, "-m", "pip", "config", "list", "--disable-pip-version-check"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BuildError(f"could not read pip's configuration: {e}", hint=CONFIG_HINT) from e
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise BuildError(f"could not read pip's configuration: {last}", hint=CONFIG_HINT)
    return from_settings(parse_config_list(proc.stdout))
