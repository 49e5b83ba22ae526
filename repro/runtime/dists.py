"""The distributions this interpreter has installed: names and versions, each metadata file read once.

Standard library only. ``importlib.metadata`` parses a distribution's whole metadata file (its
long description included) with the e-mail parser at every ``.metadata`` or ``.version`` access;
in an environment of a few hundred distributions that costs a third of a second, paid at the end
of every run. The name and the version are header fields, found before the first empty line of
``METADATA`` (``PKG-INFO`` for older formats): `installed` reads just that, once per distribution.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata
from typing import Any


def installed() -> Iterator[tuple[str, str, Any]]:
    """(name, version, distribution) of each distribution on the import path, in path order; the
    name as its metadata spells it, "" where it has none."""
    for dist in metadata.distributions():
        name, version = header(dist)
        yield name, version, dist


def header(dist: Any) -> tuple[str, str]:
    """The ``Name`` and ``Version`` fields of a distribution's metadata ("" for a missing one), as
    ``dist.metadata["Name"]`` and ``dist.version`` read them: the first of each, before the body."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or dist.read_text("") or ""
    name = version = None
    for line in text.splitlines():
        if not line.strip():
            break
        if line[:1] in (" ", "\t"):
            continue  # a folded continuation of the field before
        key, sep, value = line.partition(":")
        if not sep:
            break  # not a field: the e-mail parser ends the header here too
        key = key.lower()
        if key == "name" and name is None:
            name = value.lstrip(" \t")
        elif key == "version" and version is None:
            version = value.lstrip(" \t")
        if name is not None and version is not None:
            break
    return name or "", version or ""
