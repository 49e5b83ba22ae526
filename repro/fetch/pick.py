"""Which file of a pinned release to take: a wheel the target Python can install, else the sdist.

The lock pins a release by version and sha256 digests (pip-tools lists the digest of every
file of the release). A file qualifies when its name is that release and its stated digest
(if the source states one) is among the lock's. Wheels come first, best tag match first
(pip's order); the source distribution last, for a release that has no wheel for the target.
"""

from __future__ import annotations

import sys

from packaging import tags

from repro.facts.lockfile import Pinned
from repro.fetch.index import Link


def target_tags(python_version: str | None = None) -> list[tags.Tag]:
    """The wheel tags a Python ``X.Y`` on this platform installs, most specific first (the host's
    own interpreter when ``python_version`` is None or the host's version)."""
    host = f"{sys.version_info.major}.{sys.version_info.minor}"
    if not python_version or python_version == host:
        return list(tags.sys_tags())
    major, minor = (int(p) for p in python_version.split(".")[:2])
    platforms = list(tags.platform_tags())
    return [
        *tags.cpython_tags((major, minor), platforms=platforms),
        *tags.compatible_tags((major, minor), interpreter=f"cp{major}{minor}", platforms=platforms),
    ]


def candidates(links: list[Link], req: Pinned, ranked: list[tags.Tag]) -> list[Link]:
    """The files of ``links`` that may be ``req``'s pinned file, in the order to try them:
    compatible wheels by tag rank (a stated digest before none), then source distributions."""
    rank = {tag: i for i, tag in enumerate(ranked)}
    hashes = set(req.hashes)
    wheels: list[tuple[int, int, Link]] = []
    sdists: list[tuple[int, Link]] = []
    for link in links:
        if not link.name.is_release(req.key, req.version):
            continue
        if link.sha256 is not None and link.sha256 not in hashes:
            continue
        unstated = int(link.sha256 is None)
        if link.name.kind == "wheel":
            best = min((rank[t] for t in link.name.tags if t in rank), default=None)
            if best is not None:
                wheels.append((best, unstated, link))
        else:
            sdists.append((unstated, link))
    wheels.sort(key=lambda w: (w[0], w[1]))
    sdists.sort(key=lambda s: s[0])
    return [w[2] for w in wheels] + [s[1] for s in sdists]
