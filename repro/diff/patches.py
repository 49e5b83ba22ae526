"""Unified diffs: split a `git diff` by file, reverse one, count its lines, compare two patches."""

from __future__ import annotations

import difflib
import re

from repro.diff.model import Change

_DIFF_HEADER = re.compile(r"^diff --git a/(.+?) b/(.+)$")


def split_patch(patch: str) -> dict[str, str]:
    """Split a `git diff` into {path: that file's part of the patch}."""
    parts: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in patch.splitlines(keepends=True):
        m = _DIFF_HEADER.match(line.rstrip("\n"))
        if m:
            current = parts.setdefault(m.group(2), [])
        if current is not None:
            current.append(line)
    return {path: "".join(lines) for path, lines in parts.items()}


def reverse_patch(part: str) -> str:
    """Invert one file's unified diff (B → A becomes A → B)."""
    out: list[str] = []
    hunk = re.compile(r"^@@ -(\S+) \+(\S+) @@(.*)$")
    for line in part.splitlines(keepends=True):
        body = line.rstrip("\n")
        nl = line[len(body) :]
        m = hunk.match(body)
        if m:
            out.append(f"@@ -{m.group(2)} +{m.group(1)} @@{m.group(3)}{nl}")
        elif body.startswith("--- "):
            out.append("+++ " + body[4:] + nl)
        elif body.startswith("+++ "):
            out.append("--- " + body[4:] + nl)
        elif body.startswith("+"):
            out.append("-" + body[1:] + nl)
        elif body.startswith("-"):
            out.append("+" + body[1:] + nl)
        else:
            out.append(line)
    # keep --- before +++ as patch readers expect
    for i in range(len(out) - 1):
        if out[i].startswith("+++ ") and out[i + 1].startswith("--- "):
            out[i], out[i + 1] = out[i + 1], out[i]
    return "".join(out)


def patch_counts(part: str) -> tuple[int, int]:
    """(added, removed) lines in the hunks of one file's patch."""
    added = removed = 0
    in_hunk = False
    for line in part.splitlines():
        if line.startswith("@@"):
            in_hunk = True
        elif not in_hunk:
            continue
        elif line.startswith("+"):
            added += 1
        elif line.startswith("-"):
            removed += 1
    return added, removed


def post_image(part: str) -> list[str]:
    """The lines one file's patch leaves (context and added), one ``@@`` per hunk."""
    lines: list[str] = []
    in_hunk = False
    for line in part.splitlines():
        if line.startswith("@@"):
            in_hunk = True
            lines.append("@@")
        elif in_hunk and line[:1] in ("+", " "):
            lines.append(line[1:])
    return lines


def line_counts(old: str, new: str) -> tuple[int, int]:
    """(added, removed) lines between two texts."""
    added = removed = 0
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def patch_changes(pa: str, pb: str, patches: list[str] | None) -> list[Change]:
    """One change per file whose uncommitted patch differs; each file's diff goes to ``patches`` if given."""
    sa, sb = split_patch(pa), split_patch(pb)
    changes: list[Change] = []
    for path in sorted(set(sa) | set(sb)):
        x, y = sa.get(path), sb.get(path)
        if x == y:
            continue
        if x is None:
            assert y is not None
            lines = patch_counts(y)
            detail = "uncommitted change in B only"
            text = y
        elif y is None:
            removed, added = patch_counts(x)
            lines = (added, removed)
            detail = "uncommitted change in A only"
            text = reverse_patch(x)
        else:
            lines = line_counts("\n".join(post_image(x)), "\n".join(post_image(y)))
            detail = "uncommitted changes differ"
            text = "".join(
                difflib.unified_diff(
                    x.splitlines(keepends=True),
                    y.splitlines(keepends=True),
                    fromfile=f"A: uncommitted patch of {path}",
                    tofile=f"B: uncommitted patch of {path}",
                )
            )
        changes.append(
            Change(
                key=path,
                kind="changed",
                scope="patch",
                lines=lines,
                detail=f"+{lines[0]} −{lines[1]}, {detail}",
            )
        )
        if patches is not None:
            patches.append(text if text.endswith("\n") else text + "\n")
    return changes
