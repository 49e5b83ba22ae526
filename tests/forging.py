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


def forge(tar: Path, dest: Path, edit: Edit | None = None, code: dict[str, bytes] | None = None) -> Path:
    """Write ``dest``: ``tar`` with its record edited by ``edit`` and the code files in ``code``
    (path → new bytes) replaced, each under its own new content-address, SHA256SUMS recomputed."""
    found = members(tar)
    found.pop("SHA256SUMS")
    record = yaml.safe_load(found["capsule.yaml"])
    for rel, body in (code or {}).items():
        digest = hash_bytes(body)
        found[blob_member(digest)] = body
        entry = next(f for f in record["code"]["files"] if f["path"] == rel)
        entry.update(hash=digest, size=len(body), stored=True)
    if edit is not None:
        edit(record)
    found["capsule.yaml"] = yaml.safe_dump(record, sort_keys=False).encode()
    sums = "".join(f"{hashlib.sha256(b).hexdigest()}  {n}\n" for n, b in found.items()).encode()
    with tarfile.open(dest, "w") as out:
        for name, body in [*found.items(), ("SHA256SUMS", sums)]:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            out.addfile(info, io.BytesIO(body))
    return dest
