"""Forging capsules as an attacker does: take a genuine export, change its record and members,
recompute SHA256SUMS. Everything a forged capsule carries is self-consistent; only what repro
decides on the replaying side can stop it."""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from repro.store.capsule import blob_member
from repro.store.hashing import hash_bytes

Edit = Callable[[dict[str, Any]], None]


def members(tar: Path) -> dict[str, bytes]:
    with tarfile.open(tar) as t:
        return {m.name: t.extractfile(m).read() for m in t if m.isreg()}  # type: ignore[union-attr]


def forge(
    tar: Path,
    dest: Path,
    edit: Edit | None = None,
    code: dict[str, bytes] | None = None,
    replace: dict[str, bytes] | None = None,
) -> Path:
    """Write ``dest``: ``tar`` with its record edited by ``edit``, the code files in ``code``
    (path → new bytes, tracked or untracked) swapped, each under its own new content-address, and the
    members in ``replace`` (name → bytes) put in; SHA256SUMS recomputed."""
    found = members(tar)
    found.pop("SHA256SUMS")
    found.update(replace or {})
    record = yaml.safe_load(found["capsule.yaml"])
    for rel, body in (code or {}).items():
        digest = hash_bytes(body)
        found[blob_member(digest)] = body
        entries = [
            f for f in [*record["code"]["files"], *record["code"].get("untracked", [])] if f["path"] == rel
        ]
        assert entries, f"{rel} is not in the capsule's code"
        for entry in entries:
            entry.update(hash=digest, size=len(body), stored=True)
    if edit is not None:
        edit(record)
    found["capsule.yaml"] = yaml.safe_dump(record, sort_keys=False).encode()
    return write(dest, found)


def write(dest: Path, found: dict[str, bytes]) -> Path:
    """A capsule tar at ``dest`` holding ``found`` (name → bytes) and their recomputed SHA256SUMS."""
    sums = "".join(f"{hashlib.sha256(b).hexdigest()}  {n}\n" for n, b in found.items()).encode()
    with tarfile.open(dest, "w") as out:
        for name, body in [*found.items(), ("SHA256SUMS", sums)]:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            out.addfile(info, io.BytesIO(body))
    return dest
