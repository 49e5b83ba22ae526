"""uv.lock (uv's universal lockfile) read as data: the packages the project's groups reach, with markers.

The project itself is the package whose source is the project directory (``virtual`` or
``editable`` ``"."``); its ``[package.metadata]`` keeps what pyproject.toml asked for when
``uv lock`` ran, which is how a stale lock is told (as ``uv lock --check`` does).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from repro.facts.lockfile import canonical_name
from repro.facts.projectlock.common import (
    Entry,
    ProjectLock,
    and_markers,
    choose,
    file_sha256,
    refused,
    stale,
)

MAX_PATHS = 16  # distinct markers kept per package before it is taken as wanted everywhere
_OWN = ("virtual", "editable")
_KINDS = {"git": "a git URL", "url": "a direct URL", "path": "a local path", "directory": "a local directory",
          "editable": "a local directory", "virtual": "a local directory"}  # fmt: skip


def read(
    file: str, data: dict[str, Any], pyproject: dict[str, Any], groups: Sequence[str] | None
) -> ProjectLock:
    """The packages of ``data`` (a parsed uv.lock) that the project's main dependencies and ``groups``
    reach.

    Raises:
        UsageError: the lock is stale, a group is unknown, or a package comes from git or a path.
    """
    packages = [p for p in data.get("package", []) if isinstance(p, dict)]
    root = _root(file, packages, pyproject)
    check_fresh(file, data, root, pyproject)
    known = sorted({*root.get("dev-dependencies", {}), *root.get("optional-dependencies", {})})
    chosen = choose(file, groups, _default_groups(root, pyproject), known)
    start = list(root.get("dependencies", []))
    for group in chosen:
        start += root.get("dev-dependencies", {}).get(group, [])
        start += root.get("optional-dependencies", {}).get(group, [])
    reached = _walk(packages, start)
    entries = [_entry(file, pkg, markers) for pkg, markers in reached if pkg is not root]
    return ProjectLock(file, "uv", chosen, entries)


def _root(file: str, packages: list[dict[str, Any]], pyproject: dict[str, Any]) -> dict[str, Any]:
    name = canonical_name(str(pyproject.get("project", {}).get("name", "")))
    for pkg in packages:
        source = pkg.get("source", {})
        if any(source.get(k) == "." for k in _OWN) or (name and canonical_name(pkg.get("name", "")) == name):
            return pkg
    raise stale(file, "it holds no package for the project itself")


def _default_groups(root: dict[str, Any], pyproject: dict[str, Any]) -> list[str]:
    configured = pyproject.get("tool", {}).get("uv", {}).get("default-groups")
    if configured == "all":
        return sorted(root.get("dev-dependencies", {}))
    if isinstance(configured, list):
        return [str(g) for g in configured]
    return ["dev"]


def check_fresh(file: str, data: dict[str, Any], root: dict[str, Any], pyproject: dict[str, Any]) -> None:
    """Raise when pyproject.toml asks for other dependencies than the lock was made from.

    Raises:
        UsageError: stale, with what changed.
    """
    project = pyproject.get("project", {})
    metadata = root.get("metadata", {})
    wanted = list(project.get("dependencies", []))
    for extra, reqs in project.get("optional-dependencies", {}).items():
        wanted += [f"{r} ; extra == '{extra}'" if ";" not in r else r for r in reqs]
    _compare(
        file, "[project] dependencies", _from_pyproject(wanted), _from_lock(metadata.get("requires-dist", []))
    )
    declared = {k: v for k, v in pyproject.get("dependency-groups", {}).items()}
    legacy = pyproject.get("tool", {}).get("uv", {}).get("dev-dependencies")
    if legacy:
        declared["dev"] = [*declared.get("dev", []), *legacy]
    locked = metadata.get("requires-dev", {})
    for group in sorted(set(declared) | set(locked)):
        reqs = [r for r in declared.get(group, []) if isinstance(r, str)]
        _compare(
            file, f"dependency group {group!r}", _from_pyproject(reqs), _from_lock(locked.get(group, []))
        )
    python = project.get("requires-python")
    if python and _spec(python) != _spec(data.get("requires-python", "")):
        raise stale(
            file, f"requires-python is {python!r} in pyproject.toml, {data.get('requires-python')!r} in it"
        )


def _compare(file: str, what: str, declared: set[str], locked: set[str]) -> None:
    if declared != locked:
        changed = sorted(declared ^ locked)
        raise stale(file, f"{what} changed since it was locked ({', '.join(changed[:4])})")


def _from_pyproject(reqs: list[str]) -> set[str]:
    found = set()
    for text in reqs:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            found.add(text)
            continue
        found.add(_key(req.name, sorted(req.extras), str(req.specifier)))
    return found


def _from_lock(reqs: list[Any]) -> set[str]:
    return {
        _key(str(r.get("name", "")), sorted(r.get("extras", [])), r.get("specifier", ""))
        for r in reqs
        if isinstance(r, dict)
    }


def _key(name: str, extras: list[str], specifier: str) -> str:
    extra = f"[{','.join(canonical_name(e) for e in extras)}]" if extras else ""
    return f"{canonical_name(name)}{extra}{_spec(specifier)}"


def _spec(text: str) -> str:
    try:
        return str(SpecifierSet(text))
    except InvalidSpecifier:
        return text


def _walk(packages: list[dict[str, Any]], start: list[Any]) -> list[tuple[dict[str, Any], list[str | None]]]:
    """Every package reachable from the ``start`` edges, with the markers of the paths that reach it."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for pkg in packages:
        by_name.setdefault(canonical_name(pkg.get("name", "")), []).append(pkg)
    reach: dict[int, list[str | None]] = {}
    order: list[dict[str, Any]] = []
    queue: deque[tuple[dict[str, Any], str | None]] = deque((e, None) for e in start if isinstance(e, dict))
    while queue:
        edge, above = queue.popleft()
        marker = and_markers(above, edge.get("marker"))
        for pkg in _targets(by_name, edge):
            seen = reach.setdefault(id(pkg), [])
            if not seen:
                order.append(pkg)
            if None in seen or marker in seen:
                continue
            seen[:] = [None] if marker is None or len(seen) >= MAX_PATHS else [*seen, marker]
            nxt = list(pkg.get("dependencies", []))
            for extra in edge.get("extra", []):
                nxt += pkg.get("optional-dependencies", {}).get(extra, [])
            queue.extend((e, marker) for e in nxt if isinstance(e, dict))
    return [(pkg, reach[id(pkg)]) for pkg in order]


def _targets(by_name: dict[str, list[dict[str, Any]]], edge: dict[str, Any]) -> list[dict[str, Any]]:
    found = by_name.get(canonical_name(str(edge.get("name", ""))), [])
    if "version" in edge:
        found = [p for p in found if p.get("version") == edge["version"]]
    if "source" in edge:
        found = [p for p in found if p.get("source") == edge["source"]] or found
    return found


def _sha256(f: dict[str, Any]) -> str | None:
    """A file's sha256: as the lock states it, else (a wheel uv found in a find-links folder, which
    it locks by path with no hash) taken from the file the lock names."""
    stated = str(f.get("hash", ""))
    if stated.startswith("sha256:"):
        return stated.split(":", 1)[1]
    path = f.get("path")
    return file_sha256(Path(str(path))) if path and Path(str(path)).is_absolute() else None


def _entry(file: str, pkg: dict[str, Any], markers: list[str | None]) -> Entry:
    name, source = str(pkg.get("name", "")), pkg.get("source", {})
    if "registry" not in source:
        kind, where = next(iter(source.items()), ("source", "?"))
        what = _KINDS.get(kind, kind)
        raise refused(file, name, f"{what} ({where})")
    files = [*pkg.get("wheels", []), *([pkg["sdist"]] if isinstance(pkg.get("sdist"), dict) else [])]
    hashes = tuple(h for h in (_sha256(f) for f in files if isinstance(f, dict)) if h)
    if not hashes:
        raise refused(file, name, "a release with no sha256 in the lock")
    marker = (
        None
        if None in markers
        else " or ".join(f"({m})" for m in markers)
        if len(markers) > 1
        else markers[0]
    )
    return Entry(name, str(pkg.get("version", "")), hashes, marker)
