"""Lockfiles and package names: the one home of pin parsing, name normalisation and repro's cache path.

Built on ``packaging``: a lockfile line is a PEP 508 requirement pinned with ``==``
followed by ``--hash=sha256:…`` options (pip-tools ``--generate-hashes``); names compare
in their PEP 503 normal form; versions order by PEP 440.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from repro.errors import BuildError

if TYPE_CHECKING:
    from packaging.requirements import Requirement

HEADER = "# repro-lock-inputs: "
LOCK_HINT = "compile the lockfile with `repro lock` (pip-compile --generate-hashes)"
_HASH = re.compile(r"--hash[= ]sha256:([0-9a-f]{64})")
_OPTION = re.compile(r"\s--hash[= ]\S+")
# `name==version` with a PEP 508 name and a version in PEP 440's normal form: what `_pin` reads it as,
# without packaging's parser (15 ms to import); any other line goes through `_pin`.
_PLAIN_PIN = re.compile(
    r"(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*==\s*"
    r"(?P<version>(?:[1-9][0-9]*!)?(?:0|[1-9][0-9]*)(?:\.(?:0|[1-9][0-9]*))*(?:(?:a|b|rc)(?:0|[1-9][0-9]*))?"
    r"(?:\.post(?:0|[1-9][0-9]*))?(?:\.dev(?:0|[1-9][0-9]*))?(?:\+[a-z0-9]+(?:\.[a-z0-9]+)*)?)"
)
_SEPARATORS = re.compile(r"[-_.]+")  # packaging.utils.canonicalize_name's rule, without its 6 ms import


def canonical_name(name: str) -> str:
    """The PEP 503 normal form of a project name: ``Typing_Extensions`` → ``typing-extensions``."""
    return _SEPARATORS.sub("-", name).lower()


def cache_dir() -> Path:
    """repro's per-user cache: ``$REPRO_CACHE_DIR`` or ``$XDG_CACHE_HOME/repro`` or ``~/.cache/repro``."""
    if os.environ.get("REPRO_CACHE_DIR"):
        return Path(os.environ["REPRO_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "repro"


@dataclass
class Pinned:
    """One requirement of a hash-pinned lockfile."""

    name: str
    version: str
    hashes: list[str] = field(default_factory=list)  # sha256 hex digests
    text: str = ""  # the requirement as written, continuation lines joined
    marker: str | None = None

    @property
    def key(self) -> str:
        """The normalised project name (PEP 503)."""
        return canonical_name(self.name)


def logical_lines(text: str) -> list[str]:
    """A requirements text's entries: comments dropped, ``\\`` continuations joined."""
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = "" if raw.lstrip().startswith("#") else raw.split(" #", 1)[0]
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        current += line
        if current.strip():
            logical.append(current.strip())
        current = ""
    if current.strip():
        logical.append(current.strip())
    return logical


def _pin(entry: str) -> tuple[Requirement, str] | None:
    """The requirement and its pinned version, or None when ``entry`` is not ``name==version``."""
    from packaging.requirements import InvalidRequirement, Requirement  # 15 ms: only for a pinned line

    try:
        req = Requirement(_OPTION.sub("", " " + entry).strip())
    except InvalidRequirement:
        return None
    specs = list(req.specifier)
    if len(specs) != 1 or specs[0].operator not in ("==", "==="):
        return None
    if not specs[0].version or "*" in specs[0].version:
        return None
    return req, specs[0].version


def parse_lockfile(text: str) -> list[Pinned]:
    """The pinned requirements of a pip-tools lockfile (options and comments are skipped).

    Raises:
        BuildError: a requirement that is not pinned with ``==`` or has no hash.
    """
    pinned: list[Pinned] = []
    for entry in logical_lines(text):
        if entry.startswith("-"):
            continue  # --index-url, --find-links, ...: the build ignores indexes
        found = _pin(entry)
        if found is None:
            raise BuildError(f"lockfile entry is not pinned with '==': {entry[:80]}", hint=LOCK_HINT)
        req, version = found
        hashes = _HASH.findall(entry)
        if not hashes:
            raise BuildError(f"lockfile entry has no --hash: {req.name}", hint=LOCK_HINT)
        marker = str(req.marker) if req.marker else None
        pinned.append(Pinned(req.name, version, hashes, entry, marker))
    return pinned


def pins(lines: Iterable[str]) -> dict[str, str]:
    """``name==version`` entries (requirements, lockfile, pip freeze) → {normal name: version}.

    Lenient: lines that are not exact pins (ranges, options, comments) are skipped.
    """
    found: dict[str, str] = {}
    for entry in logical_lines("\n".join(lines)):
        plain = _PLAIN_PIN.fullmatch(_OPTION.sub("", " " + entry).strip())
        if plain is not None:  # the common line (pip freeze): no parser needed for its one reading
            found[canonical_name(plain["name"])] = plain["version"]
            continue
        pin = _pin(entry)
        if pin is not None:
            found[canonical_name(pin[0].name)] = pin[1]
    return found


def pin_list(text: str) -> list[str]:
    """``name==version`` of every pin in a requirements/lock text, names normalised, sorted."""
    return sorted(f"{k}=={v}" for k, v in pins(text.splitlines()).items())


def top_level_names(text: str) -> list[str]:
    """The normalised names a requirements source asks for directly (options and bad lines skipped)."""
    from packaging.requirements import InvalidRequirement, Requirement

    names: list[str] = []
    for entry in logical_lines(text):
        if entry.startswith("-"):
            continue
        try:
            names.append(canonical_name(Requirement(_OPTION.sub("", " " + entry).strip()).name))
        except InvalidRequirement:
            continue
    return sorted(set(names))


InstalledFrom = Literal["wheel", "source", "unknown"]  # from an index, built in the sandbox, not recorded


@dataclass(frozen=True)
class LockedPackage:
    """One package a run's lock pins, and how it went into the run's image."""

    name: str  # PEP 503 normal form
    version: str
    installed_from: InstalledFrom


def locked_packages(
    lock_text: str | None, requirements: list[str], installed_from: dict[str, str]
) -> list[LockedPackage]:
    """Every package of a lock (its text; else the record's ``name==version`` list), sorted by name,
    with how it was installed (``installed_from`` as recorded; a value it does not hold: unknown).

    Lenient: a line that is not an exact pin is skipped, never an error (a capsule's lock is shown
    as it is, whatever it holds).
    """
    found = pins(lock_text.splitlines()) if lock_text else {}
    found = found or pins(requirements)
    return [
        LockedPackage(name, ver, _installed(installed_from.get(name))) for name, ver in sorted(found.items())
    ]


def _installed(recorded: str | None) -> InstalledFrom:
    """How a package was installed, as recorded: wheel or source; anything else is unknown."""
    return "wheel" if recorded == "wheel" else "source" if recorded == "source" else "unknown"


def compare_versions(old: str, new: str) -> int:
    """-1, 0 or 1 as ``old`` is lower than, equal to or higher than ``new`` (PEP 440 where it parses)."""
    from packaging.version import InvalidVersion, Version

    try:
        va, vb = Version(old), Version(new)
    except InvalidVersion:
        ka, kb = _fallback_key(old), _fallback_key(new)
        return (ka > kb) - (ka < kb)
    return (va > vb) - (va < vb)


def _fallback_key(v: str) -> list[tuple[int, int | str]]:
    return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[.+\-_]", v) if p]


def inputs_header(text: str) -> str | None:
    """The inputs hash a repro lockfile was compiled for (its first line), or None."""
    first = text.split("\n", 1)[0]
    if not first.startswith(HEADER):
        return None
    return first[len(HEADER) :].strip() or None


@dataclass(frozen=True)
class Mismatch:
    """A package whose locked and installed versions differ (either may be absent)."""

    name: str
    locked: str | None
    installed: str | None

    def describe(self) -> str:
        return f"{self.name}: locked {self.locked or 'absent'}, ran {self.installed or 'absent'}"


def mismatches(locked: Iterable[str], installed: Iterable[str]) -> list[Mismatch]:
    """Locked packages that ran at another version, or did not run at all; sorted by name.

    Installed packages the lock does not name (tools, the project itself) are not differences.
    """
    want, have = pins(locked), pins(installed)
    return [
        Mismatch(name, version, have.get(name))
        for name, version in sorted(want.items())
        if have.get(name) != version
    ]


def freeze_diff(recorded: list[str], current: list[str]) -> list[str]:
    """Packages whose presence or version differs: ``name: recorded → current``."""
    a, b = pins(recorded), pins(current)
    return [
        f"{name}: {a.get(name, 'absent')} → {b.get(name, 'absent')}"
        for name in sorted(set(a) | set(b))
        if a.get(name) != b.get(name)
    ]
