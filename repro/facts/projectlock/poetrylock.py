"""poetry.lock read as data: the packages of the main group and the chosen groups and extras.

Poetry 2 writes each package's groups and markers into the lock (``lock-version`` 2.1), so
no graph is walked here; an older lock's ``category`` stands for its one group. Staleness is
Poetry's own test: the ``content-hash`` of the relevant parts of pyproject.toml.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from hashlib import sha256
from typing import Any

from packaging.version import InvalidVersion, Version

from repro.facts.lockfile import canonical_name
from repro.facts.projectlock.common import Entry, ProjectLock, choose, refused, stale

_LEGACY_KEYS = ("dependencies", "source", "extras", "dev-dependencies")
_POETRY_KEYS = (*_LEGACY_KEYS, "group")
_PROJECT_KEYS = ("requires-python", "dependencies", "optional-dependencies")
_REGISTRY = ("legacy", "pypi", "")  # an index, or PyPI itself (no [package.source])
_KINDS = {"git": "a git URL", "directory": "a local directory", "file": "a local file", "url": "a direct URL"}


def read(
    file: str, data: dict[str, Any], pyproject: dict[str, Any], groups: Sequence[str] | None, text: str
) -> ProjectLock:
    """The packages of ``data`` (a parsed poetry.lock) for the main group and ``groups``.

    Raises:
        UsageError: the lock is stale, a group is unknown, or a package comes from git or a path.
    """
    recorded = data.get("metadata", {}).get("content-hash")
    if recorded != content_hash(pyproject, _made_by(text)):
        raise stale(file, "pyproject.toml changed since it was locked (its content-hash differs)")
    packages = [p for p in data.get("package", []) if isinstance(p, dict)]
    extras = {str(k): {canonical_name(n.split()[0]) for n in v} for k, v in data.get("extras", {}).items()}
    in_lock = sorted({g for p in packages for g in _groups(p)} - {"main"})
    chosen = choose(file, groups, _default_groups(pyproject, in_lock), [*in_lock, *sorted(extras)])
    wanted = {"main", *chosen}
    entries = []
    for pkg in packages:
        name = canonical_name(str(pkg.get("name", "")))
        mine = [g for g in _groups(pkg) if g in wanted]
        if not mine:
            continue
        if pkg.get("optional") and not any(name in extras.get(e, set()) for e in chosen):
            continue
        entries.append(_entry(file, pkg, mine))
    return ProjectLock(file, "Poetry", chosen, entries)


def _groups(pkg: dict[str, Any]) -> list[str]:
    found = pkg.get("groups")
    if isinstance(found, list):
        return [str(g) for g in found]
    return [str(pkg.get("category", "main"))]


def _default_groups(pyproject: dict[str, Any], in_lock: list[str]) -> list[str]:
    """What `poetry install` installs: every group not declared ``optional = true``."""
    declared = pyproject.get("tool", {}).get("poetry", {}).get("group", {})
    optional = {str(g) for g, body in declared.items() if isinstance(body, dict) and body.get("optional")}
    return [g for g in in_lock if g not in optional]


def _entry(file: str, pkg: dict[str, Any], groups: list[str]) -> Entry:
    name = str(pkg.get("name", ""))
    source = pkg.get("source", {})
    kind = str(source.get("type", "")) if isinstance(source, dict) else ""
    if kind not in _REGISTRY:
        raise refused(file, name, f"{_KINDS.get(kind, kind)} ({source.get('url', '?')})")
    hashes = tuple(
        str(f["hash"]).split(":", 1)[1]
        for f in pkg.get("files", [])
        if isinstance(f, dict) and str(f.get("hash", "")).startswith("sha256:")
    )
    if not hashes:
        raise refused(file, name, "a release with no sha256 in the lock")
    return Entry(name, str(pkg.get("version", "")), hashes, _marker(pkg.get("markers"), groups))


def _marker(markers: Any, groups: list[str]) -> str | None:
    """The package's marker for the chosen ``groups`` (a table of markers by group, or one string)."""
    if isinstance(markers, str):
        return markers or None
    if not isinstance(markers, dict):
        return None
    per_group = [markers.get(g) for g in groups]
    if any(not m for m in per_group):
        return None
    unique = sorted({str(m) for m in per_group})
    return unique[0] if len(unique) == 1 else " or ".join(f"({m})" for m in unique)


def content_hash(pyproject: dict[str, Any], made_by: Version | None = None) -> str:
    """Poetry's content-hash of a pyproject (``poetry.packages.locker``); a lock made before
    Poetry 2.3 hashed it without ``[dependency-groups]``."""
    project = pyproject.get("project", {})
    with_groups = made_by is None or made_by >= Version("2.3.0")
    groups = pyproject.get("dependency-groups", {}) if with_groups else {}
    poetry = pyproject.get("tool", {}).get("poetry", {})
    relevant_project = {k: project[k] for k in _PROJECT_KEYS if project.get(k) is not None}
    relevant_poetry = {}
    for key in _POETRY_KEYS:
        value = poetry.get(key)
        if value is None and (key not in _LEGACY_KEYS or relevant_project or groups):
            continue
        relevant_poetry[key] = value
    content: dict[str, Any] = {}
    if relevant_project:
        content["project"] = relevant_project
    if groups:
        content["dependency-groups"] = groups
    content = {**content, "tool": {"poetry": relevant_poetry}} if content else relevant_poetry
    return sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def _made_by(text: str) -> Version | None:
    found = re.search(r"Poetry ([^ ]+)", text.split("\n", 1)[0])
    try:
        return Version(found.group(1)) if found else None
    except InvalidVersion:
        return None
