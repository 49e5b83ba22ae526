"""File lists compared by path and hash, grouped by directory, summarised, and diffed as text."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import PurePosixPath

from repro.diff.model import Change, DirGroup
from repro.diff.patches import line_counts
from repro.diff.reader import SafeReader
from repro.store.record import FileEntry
from repro.units import human_bytes, plural

MAX_GROUPS = 20  # directory groups kept per file section before grouping one level up


def file_changes(a: Iterable[FileEntry], b: Iterable[FileEntry], scope: str) -> list[Change]:
    """Added/removed/changed files by path and hash; old/new are sizes in bytes."""
    old = {e.path: e for e in a}
    new = {e.path: e for e in b}
    changes: list[Change] = []
    for path in sorted(set(old) | set(new)):
        x, y = old.get(path), new.get(path)
        if y is None:
            assert x is not None
            changes.append(Change(key=path, kind="removed", scope=scope, old=x.size, delta=-x.size))
        elif x is None:
            changes.append(Change(key=path, kind="added", scope=scope, new=y.size, delta=y.size))
        elif x.hash != y.hash:
            changes.append(
                Change(key=path, kind="changed", scope=scope, old=x.size, new=y.size, delta=y.size - x.size)
            )
    return changes


def group_by_dir(changes: list[Change], max_groups: int = MAX_GROUPS) -> list[DirGroup]:
    """Summarise file changes by directory, going up a level until at most ``max_groups`` remain."""
    files = [c for c in changes if c.kind in ("added", "removed", "changed")]
    if not files:
        return []
    parents = {c.key: PurePosixPath(c.key).parent.parts for c in files}
    depth = max((len(p) for p in parents.values()), default=0)
    while True:
        groups: dict[str, DirGroup] = {}
        for c in files:
            parts = parents[c.key][:depth]
            name = "/".join(parts) + "/" if parts else "./"
            g = groups.setdefault(name, DirGroup(dir=name))
            size_old = int(c.old or 0)
            size_new = int(c.new or 0)
            if c.kind == "added":
                g.added += 1
                g.bytes_added += size_new
            elif c.kind == "removed":
                g.removed += 1
                g.bytes_removed += size_old
            else:
                g.changed += 1
            g.bytes_delta += size_new - size_old
        if len(groups) <= max_groups or depth == 0:
            return [groups[k] for k in sorted(groups)]
        depth -= 1


def files_summary(changes: list[Change], noun: str = "file") -> str:
    """File changes as a phrase: counts added, removed and changed with their bytes."""
    added = [c for c in changes if c.kind == "added"]
    removed = [c for c in changes if c.kind == "removed"]
    changed = [c for c in changes if c.kind == "changed"]
    parts = []
    if added:
        parts.append(
            f"{plural(len(added), noun)} added ({_signed_bytes(sum(int(c.new or 0) for c in added))})"
        )
    if removed:
        parts.append(
            f"{plural(len(removed), noun)} removed ({_signed_bytes(-sum(int(c.old or 0) for c in removed))})"
        )
    if changed:
        net = sum(int(c.new or 0) - int(c.old or 0) for c in changed)
        parts.append(f"{plural(len(changed), noun)} changed ({_signed_bytes(net)})")
    return ", ".join(parts)


def _signed_bytes(n: int) -> str:
    return ("+" if n >= 0 else "−") + human_bytes(abs(n))


def add_line_counts(c: Change, a: list[FileEntry], b: list[FileEntry], read: SafeReader) -> None:
    """Set a text file change's added/removed line counts where both contents are stored."""
    ea = {e.path: e for e in a}.get(c.key)
    eb = {e.path: e for e in b}.get(c.key)
    ta = read.text(ea.hash) if ea and ea.stored else ("" if ea is None else None)
    tb = read.text(eb.hash) if eb and eb.stored else ("" if eb is None else None)
    if ta is not None and tb is not None and not (binary(ta) or binary(tb)):
        c.lines = line_counts(ta, tb)
        c.detail = f"+{c.lines[0]} −{c.lines[1]}"


def binary(text: str) -> bool:
    """Whether decoded blob text looks binary (a NUL byte in its first 8 KiB)."""
    return "\x00" in text[:8192]


def file_patch(c: Change, fa: list[FileEntry], fb: list[FileEntry], read: SafeReader) -> str:
    """The unified diff of one changed file from the stored contents, or a line saying why not."""
    ea = {e.path: e for e in fa}.get(c.key)
    eb = {e.path: e for e in fb}.get(c.key)
    ta = "" if ea is None else (read.text(ea.hash) if ea.stored else None)
    tb = "" if eb is None else (read.text(eb.hash) if eb.stored else None)
    if ta is None or tb is None:
        return f"# {c.key}: content not stored in the capsule\n"
    if binary(ta) or binary(tb):
        return f"Binary files a/{c.key} and b/{c.key} differ\n"
    text = "".join(
        difflib.unified_diff(
            ta.splitlines(keepends=True),
            tb.splitlines(keepends=True),
            fromfile="/dev/null" if ea is None else f"a/{c.key}",
            tofile="/dev/null" if eb is None else f"b/{c.key}",
        )
    )
    return text if text.endswith("\n") or not text else text + "\n"
