"""The data: a manifest (path, size, xxh3-128) of every declared input, and drift checks."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from repro.errors import NotFoundError, UsageError
from repro.facts import hostpaths
from repro.facts.dvc import dvc_sources
from repro.store.record import MANIFEST_INLINE, DataInput, encode_manifest
from repro.store.statcache import HashCache
from repro.store.treehash import TreeDigest, hash_tree

Progress = Callable[[int, int], None]


def capture_data(
    paths: list[str],
    root: Path,
    cache: HashCache | None = None,
    on_progress: Progress | None = None,
    put_bytes: Callable[[bytes], str] | None = None,
) -> list[DataInput]:
    """Hash each declared input (file or directory) relative to ``root``, with the DVC outputs
    that hold it (`repro.facts.dvc`).

    With ``put_bytes``, an input of more than ``MANIFEST_INLINE`` files keeps its manifest
    in a blob, so the record stays small (and `repro show` fast) for large trees.

    Raises:
        NotFoundError: a declared input does not exist.
        UsageError: a declared input resolves outside the project.
    """
    inputs: list[DataInput] = []
    for rel in paths:
        # Normalised, not resolved: a link inside the project to a dataset elsewhere is fine.
        path = Path(os.path.normpath(root / rel))
        if not path.is_relative_to(root):
            raise UsageError(
                f"declared data {rel!r} is outside the project {root}",
                hint="declare data inside the project (a symbolic link to it there works too)",
            )
        if not path.exists():
            raise NotFoundError(
                f"declared data {rel!r} does not exist under {root}",
                hint="check --data (relative to where you stand) or `data:` in repro.yaml (relative to "
                "the project root)",
            )
        tree = hash_tree(path, root, cache=cache, on_progress=on_progress)
        item = DataInput(_rel(path, root), tree.digest, tree.size, tree.files, count=len(tree.files))
        item.dvc = dvc_sources(root, item.path)
        if put_bytes is not None and len(tree.files) > MANIFEST_INLINE:
            item.manifest, item.files = put_bytes(encode_manifest(tree.files)), []
        inputs.append(item)
    return inputs


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


@dataclass
class Drift:
    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.changed or self.missing or self.extra)

    def describe(self) -> str:
        parts = [f"{len(v)} {k}" for k, v in (("changed", self.changed), ("missing", self.missing),
                                              ("extra", self.extra)) if v]  # fmt: skip
        return "data drift: " + ", ".join(parts)


def check_data(
    recorded: list[DataInput],
    data_root: Path,
    cache: HashCache | None = None,
    on_progress: Progress | None = None,
    read_blob: Callable[[str], bytes | None] = lambda digest: None,
    hashed: Mapping[str, TreeDigest] | None = None,
) -> Drift:
    """Compare the recorded manifest with the data under ``data_root`` (same relative paths).

    Manifest blobs are only read when an input differs (``read_blob``). ``hashed``: inputs already
    hashed under ``data_root`` (by path), not hashed again.

    Raises:
        CapsuleInvalid: an input differs and its manifest blob is missing or malformed.
    """
    drift = Drift()
    for item in recorded:
        path = data_root / item.path
        if hostpaths.refusal(data_root, item.path) is not None or not path.exists():  # never read there
            drift.missing += sorted(f.path for f in item.entries(read_blob))
            continue
        tree = (hashed or {}).get(item.path) or hash_tree(
            path, data_root, cache=cache, on_progress=on_progress
        )
        if tree.digest == item.digest:
            continue
        expected = {f.path: f for f in item.entries(read_blob)}
        seen = {f.path: f for f in tree.files}
        for rel, entry in expected.items():
            if rel not in seen:
                drift.missing.append(rel)
            elif seen[rel].hash != entry.hash:
                drift.changed.append(rel)
        drift.extra += sorted(set(seen) - set(expected))
    return drift
