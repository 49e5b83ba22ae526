"""Distribution file names: the one place a wheel or sdist file name is split into name and version.

Parsed with ``packaging.utils`` (``parse_wheel_filename``, ``parse_sdist_filename``), never
by hand: ``antlr4-python3-runtime-4.9.3.tar.gz`` is project ``antlr4-python3-runtime``
version 4.9.3, not project ``antlr4``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from packaging.tags import Tag
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

Kind = Literal["wheel", "sdist"]


@dataclass(frozen=True)
class DistName:
    """What a distribution file's name says: its project (PEP 503 normal form), version and kind."""

    filename: str
    key: str
    version: Version
    kind: Kind
    tags: frozenset[Tag] = frozenset()  # a wheel's compatibility tags; empty for an sdist

    def is_release(self, key: str, version: str) -> bool:
        """Whether this file belongs to project ``key`` (normal form) at ``version`` (PEP 440 equal)."""
        try:
            return self.key == key and self.version == Version(version)
        except InvalidVersion:
            return False


def parse(filename: str) -> DistName | None:
    """The name, version and kind of a wheel (``.whl``) or sdist (``.tar.gz``, ``.zip``) file name;
    None for anything else (an ``.exe`` installer, an egg, a name that does not parse) or for a
    name with a path in it."""
    if not filename or "/" in filename or "\\" in filename or filename in (".", ".."):
        return None
    try:
        if filename.endswith(".whl"):
            name, version, _build, tags = parse_wheel_filename(filename)
            return DistName(filename, str(name), version, "wheel", frozenset(tags))
        if filename.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(filename)
            return DistName(filename, str(canonicalize_name(name)), version, "sdist")
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return None
