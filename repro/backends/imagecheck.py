"""The image holds exactly the lock: what a built image's interpreter finds, against the lockfile.

At the end of every image build the image's venv is asked, by a short standard-library script run
in a container of the new image (`PROBE`), for every distribution it can import metadata of
(``importlib.metadata``: every ``*.dist-info``, duplicates included) and for its marker environment.
`differences` compares that with the lock: a locked distribution missing or at another version, one
installed twice, and anything installed that the lock does not name (the installer, pip, is named as
such) is a difference, and a build with one fails. This module imports no docker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from packaging.markers import InvalidMarker, Marker
from packaging.version import InvalidVersion, Version

from repro.facts.lockfile import canonical_name, parse_lockfile

INSTALLERS = ("pip",)  # what installs the lock; named as such when the lock does not name it

# Run as `python -I -c PROBE` in the image: one JSON object on stdout. The marker environment is
# packaging's `default_environment`, written with the standard library (the image may hold no packaging).
PROBE = """
import importlib.metadata as m, json, os, platform, sys
found = [[d.metadata["Name"] or "", d.version or "", os.fspath(d.locate_file(""))] for d in m.distributions()]
impl = sys.implementation
iv = "{0.major}.{0.minor}.{0.micro}".format(impl.version)
env = {"implementation_name": impl.name, "implementation_version": iv, "os_name": os.name,
       "platform_machine": platform.machine(), "platform_release": platform.release(),
       "platform_system": platform.system(), "platform_version": platform.version(),
       "python_full_version": platform.python_version(), "platform_python_implementation":
       platform.python_implementation(), "python_version": ".".join(platform.python_version_tuple()[:2]),
       "sys_platform": sys.platform}
print(json.dumps({"found": found, "env": env}))
"""


@dataclass(frozen=True)
class Installed:
    """One distribution the image's interpreter finds."""

    name: str
    version: str
    where: str = ""

    @property
    def key(self) -> str:
        return canonical_name(self.name)


def parse_probe(output: str) -> tuple[list[Installed], dict[str, str]]:
    """The distributions and the marker environment a `PROBE` printed.

    Raises:
        ValueError: the output is not the probe's JSON.
    """
    data: Any = json.loads(output.strip().splitlines()[-1])
    found = [Installed(str(row[0]), str(row[1]), str(row[2])) for row in data["found"]]
    return found, {str(k): str(v) for k, v in data["env"].items()}


def _applies(marker: str | None, env: dict[str, str]) -> bool:
    if not marker:
        return True
    try:
        return Marker(marker).evaluate(env)
    except InvalidMarker:
        return True


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def differences(lock_text: str, found: list[Installed], env: dict[str, str]) -> list[str]:
    """Each way the installed distributions differ from the lock, one short phrase each, by name.

    Requirements whose marker does not hold in the image are not expected there.

    Raises:
        BuildError: a malformed lockfile.
    """
    want = {req.key: req.version for req in parse_lockfile(lock_text) if _applies(req.marker, env)}
    have: dict[str, list[str]] = {}
    for dist in found:
        have.setdefault(dist.key, []).append(dist.version)
    out: list[str] = []
    for key in sorted(set(want) | set(have)):
        versions = sorted(have.get(key, []))
        if len(versions) > 1:
            out.append(f"{key} installed {len(versions)} times ({', '.join(versions)})")
        elif key not in want:
            role = " (the installer)" if key in INSTALLERS else ""
            out.append(f"{key} {versions[0]}{role} is not in the lock")
        elif not versions:
            out.append(f"{key} {want[key]} is locked but not installed")
        elif not _same(versions[0], want[key]):
            out.append(f"{key}: locked {want[key]}, installed {versions[0]}")
    return out


def message(tag: str, found: list[str]) -> str:
    """The one-line error of an image that does not hold exactly its lock."""
    shown = "; ".join(found[:8]) + (f" (+{len(found) - 8} more)" if len(found) > 8 else "")
    return f"the image {tag} does not hold exactly its lock: {shown}"
