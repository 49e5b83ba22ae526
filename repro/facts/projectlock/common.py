"""What the lockfile readers share: the rows they return, the groups they choose, the errors they raise."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from repro.errors import UsageError
from repro.facts.lockfile import cache_dir, canonical_name
from repro.store import atomic

FILES = ("uv.lock", "poetry.lock", "pylock.toml")  # the precedence when a project has several


@dataclass(frozen=True)
class Entry:
    """One locked release: its hashes (sha256 hex) and the environments it is for (None: all)."""

    name: str
    version: str
    hashes: tuple[str, ...]
    marker: str | None = None


LockTool = Literal["uv", "Poetry", "pip lock"]  # the tool that wrote a project lockfile


@dataclass
class ProjectLock:
    """A project lockfile read for the chosen groups: what the image installs."""

    file: str  # "uv.lock": the path relative to the project root
    tool: LockTool
    groups: list[str] = field(default_factory=list)  # the groups and extras installed besides the main ones
    entries: list[Entry] = field(default_factory=list)

    def text(self, environment: dict[str, str]) -> str:
        """The entries for ``environment`` (markers decided there) as a hash-pinned requirements text,
        sorted by name; where a name is locked at several versions for several environments, the
        one for this environment."""
        chosen: dict[str, Entry] = {}
        for e in self.entries:
            key = canonical_name(e.name)
            if key not in chosen and holds(e.marker, environment):
                chosen[key] = e
        lines = []
        for key, e in sorted(chosen.items()):
            hashes = "".join(f" \\\n    --hash=sha256:{h}" for h in sorted(set(e.hashes)))
            lines.append(f"{key}=={e.version}{hashes}")
        return "\n".join(lines) + "\n"


def holds(marker: str | None, environment: dict[str, str]) -> bool:
    """Whether a marker is true in ``environment`` (an unreadable marker is kept: pip decides)."""
    if not marker:
        return True
    from packaging.markers import InvalidMarker, Marker, UndefinedEnvironmentName  # 14 ms: only with markers

    try:
        return Marker(marker).evaluate(environment)
    except (InvalidMarker, UndefinedEnvironmentName):
        return True


def environment(python: str | None = None, image: bool = False) -> dict[str, str]:
    """The marker environment a lock is read for: this interpreter's, or (``image``) the images' Linux
    x86_64 CPython ``python``."""
    from packaging.markers import default_environment

    env = {k: str(v) for k, v in default_environment().items()}
    if image:
        env.update(
            os_name="posix", sys_platform="linux", platform_system="Linux", platform_machine="x86_64",
            implementation_name="cpython", platform_python_implementation="CPython",
        )  # fmt: skip
    if python:
        env.update(python_version=python, python_full_version=f"{python}.0")
    return env


def refresh(kind: str) -> str:
    """The command that refreshes a lockfile of this format."""
    kind = kind_of(Path(kind)) or kind
    return {"uv.lock": "`uv lock`", "poetry.lock": "`poetry lock`"}.get(
        kind, "`pip lock -e . -o pylock.toml`"
    )


class Stale(UsageError):
    """A project lockfile that no longer matches its pyproject.toml (exit 2: repro never re-locks it)."""


def upgrade(kind: str) -> str:
    """The command that upgrades the packages of a lockfile of this format."""
    kind = kind_of(Path(kind)) or kind
    return {"uv.lock": "`uv lock --upgrade`", "poetry.lock": "`poetry update --lock`"}.get(
        kind, "`pip lock` again, with the versions wanted"
    )


def stale(file: str, why: str) -> Stale:
    """The error for a lockfile that no longer matches its pyproject.toml."""
    return Stale(
        f"{file} is stale: {why}",
        hint=f"refresh it with {refresh(file)} and commit it (repro never re-locks a project's lockfile)",
    )


def refused(file: str, name: str, source: str) -> UsageError:
    """The error for a locked package the image cannot install from a hash-pinned release."""
    return UsageError(
        f"{file}: {name} comes from {source}, which the image cannot install as a hash-pinned release",
        hint="depend on a released version from an index (or a wheel in a find-links folder), "
        "or vendor its code into the project",
    )


def choose(
    file: str, wanted: Sequence[str] | None, default: Sequence[str], known: Sequence[str]
) -> list[str]:
    """The groups to install: ``wanted`` (deps.groups) when set, else ``default``.

    Raises:
        UsageError: a wanted group the lockfile does not know.
    """
    chosen = list(default) if wanted is None else [g for g in wanted if g != "main"]
    unknown = [g for g in chosen if g not in known]
    if unknown and wanted is not None:
        raise UsageError(
            f"deps.groups names {', '.join(unknown)}, which {file} does not have",
            hint=f"its groups and extras: {', '.join(known) or 'none'} (besides the main dependencies)",
        )
    return [g for g in chosen if g in known]


def file_sha256(path: Path) -> str | None:
    """The sha256 of a local file a lock names without a digest (None: unreadable), remembered in
    repro's cache by path, size and modification time (a torch wheel takes a second to hash)."""
    try:
        st = path.stat()
    except OSError:
        return None
    memo = (
        cache_dir()
        / "file-sha256"
        / hashlib.sha256(f"{path}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()
    )
    try:
        return memo.read_text().strip() or None
    except OSError:
        pass
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    try:
        atomic.write_bytes(memo, digest.hexdigest().encode())
    except OSError:
        pass  # a cache that cannot be written only costs the next read its time
    return digest.hexdigest()


def and_markers(*parts: str | None) -> str | None:
    """The conjunction of markers (None stands for always)."""
    kept = [p for p in parts if p]
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else " and ".join(f"({p})" for p in kept)


def kind_of(path: Path) -> str | None:
    """The format of a lockfile by its name: uv.lock, poetry.lock, pylock.toml (also pylock.NAME.toml)."""
    name = path.name
    if name in ("uv.lock", "poetry.lock", "pylock.toml"):
        return name
    if name.startswith("pylock.") and name.endswith(".toml"):
        return "pylock.toml"
    return None
