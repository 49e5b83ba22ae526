"""pylock.toml (PEP 751, what `pip lock` writes): read as a project's lock, and written from repro's lock.

Reading: every package with a version and hashed wheels or sdist; a marker that names
``extras`` or ``dependency_groups`` is decided here for the chosen groups (a marker on the
environment alone is kept for pip to decide). The project's own directory (``path = "."``)
is the project's code, not a package; other directories, VCS and archives are refused. A
pylock.toml names no inputs, so it is stale when a requirement of the project
(``[project].dependencies``, or a ``requirements.txt`` beside it) is not met by what it pins.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker, Marker, UndefinedEnvironmentName, default_environment
from packaging.requirements import InvalidRequirement, Requirement

from repro.facts.lockfile import canonical_name, logical_lines
from repro.facts.projectlock.common import Entry, ProjectLock, choose, refused, stale

_SCOPED = ("extras", "dependency_groups")


def read(
    file: str, data: dict[str, Any], pyproject: dict[str, Any], groups: Sequence[str] | None, root: Path
) -> ProjectLock:
    """The packages of ``data`` (a parsed pylock.toml) for its default groups, or ``groups``.

    Raises:
        UsageError: the lock is stale, a group is unknown, or a package comes from VCS, a path or an archive.
    """
    known = [*map(str, data.get("dependency-groups", [])), *map(str, data.get("extras", []))]
    chosen = choose(file, groups, [str(g) for g in data.get("default-groups", [])], known)
    entries = []
    for pkg in data.get("packages", []):
        if not isinstance(pkg, dict) or _is_project(pkg):
            continue
        wanted, marker = _marker(pkg.get("marker"), set(chosen) & set(data.get("extras", [])), set(chosen))
        if not wanted:
            continue
        entries.append(_entry(file, pkg, marker))
    _check_met(file, entries, _declared(pyproject, root))
    return ProjectLock(file, "pip lock", chosen, entries)


def _is_project(pkg: dict[str, Any]) -> bool:
    return isinstance(pkg.get("directory"), dict) and str(pkg["directory"].get("path", "")) in (".", "./", "")


def _marker(text: Any, extras: set[str], groups: set[str]) -> tuple[bool, str | None]:
    """Whether the chosen groups take the package, and the marker left for the environment (None: always)."""
    if not text:
        return True, None
    if not any(word in str(text) for word in _SCOPED):
        return True, str(text)
    try:
        env = {**default_environment(), "extras": extras, "dependency_groups": groups}
        return Marker(str(text)).evaluate(env), None  # type: ignore[arg-type]
    except (InvalidMarker, UndefinedEnvironmentName, TypeError):
        return True, str(text)


def _entry(file: str, pkg: dict[str, Any], marker: str | None) -> Entry:
    name = str(pkg.get("name", ""))
    for key, what in (
        ("vcs", "a VCS repository"),
        ("directory", "a local directory"),
        ("archive", "an archive"),
    ):
        if isinstance(pkg.get(key), dict):
            where = pkg[key].get("url") or pkg[key].get("path") or "?"
            raise refused(file, name, f"{what} ({where})")
    files = [*pkg.get("wheels", []), *([pkg["sdist"]] if isinstance(pkg.get("sdist"), dict) else [])]
    hashes = tuple(
        str(f["hashes"]["sha256"]) for f in files if isinstance(f, dict) and "sha256" in f.get("hashes", {})
    )
    if not pkg.get("version") or not hashes:
        raise refused(file, name, "a release with no version or no sha256 in the lock")
    return Entry(name, str(pkg["version"]), hashes, marker)


def _declared(pyproject: dict[str, Any], root: Path) -> list[str]:
    """The project's requirements a pylock.toml must meet: pyproject's, or a plain requirements.txt's."""
    found = [str(r) for r in pyproject.get("project", {}).get("dependencies", [])]
    reqs = root / "requirements.txt"
    if not found and reqs.is_file():
        text = reqs.read_text(errors="replace")
        if "--hash" not in text:
            found = [e for e in logical_lines(text) if not e.startswith("-")]
    return found


def _check_met(file: str, entries: list[Entry], declared: list[str]) -> None:
    """Raise when a declared requirement (for this environment) is missing or pinned outside its range.

    Raises:
        UsageError: stale, naming the requirement.
    """
    pinned = {canonical_name(e.name): e.version for e in entries}
    for text in declared:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        have = pinned.get(canonical_name(req.name))
        if have is None or not req.specifier.contains(have, prereleases=True):
            got = f"it pins {have}" if have else "it has no such package"
            raise stale(file, f"the project asks for {req}, {got}")


@dataclass(frozen=True)
class File:
    """A file of a pinned release, where it can be had."""

    name: str
    url: str
    sha256: str


def dumps(packages: Iterable[tuple[str, str, str | None, list[File]]], created_by: str = "repro") -> str:
    """A PEP 751 pylock.toml for ``(name, version, marker, files)`` rows (wheels and sdists by file name)."""
    out = ['lock-version = "1.0"', f"created-by = {_q(created_by)}", ""]
    for name, version, marker, files in packages:
        out += ["[[packages]]", f"name = {_q(name)}", f"version = {_q(version)}"]
        if marker:
            out.append(f"marker = {_q(marker)}")
        sdists = [f for f in files if not f.name.endswith(".whl")]
        if sdists:
            out += ["", "[packages.sdist]", *_file_lines(sdists[0])]
        for wheel in (f for f in files if f.name.endswith(".whl")):
            out += ["", "[[packages.wheels]]", *_file_lines(wheel)]
        out.append("")
    return "\n".join(out)


def _file_lines(f: File) -> list[str]:
    return [f"name = {_q(f.name)}", f"url = {_q(f.url)}", f"hashes = {{ sha256 = {_q(f.sha256)} }}"]


def _q(text: str) -> str:
    return json.dumps(text)  # a TOML basic string: JSON's escapes are TOML's
