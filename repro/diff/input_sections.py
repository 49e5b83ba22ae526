"""The sections for what a run was given: its command, its code and its data."""

from __future__ import annotations

import re
import shlex
from typing import Any

from repro.diff.changes import change_phrase, dict_changes, scalar
from repro.diff.files import (
    MAX_GROUPS,
    add_line_counts,
    file_changes,
    file_patch,
    files_summary,
    group_by_dir,
)
from repro.diff.model import Change, Section
from repro.diff.patches import patch_changes
from repro.diff.reader import SafeReader
from repro.errors import CapsuleInvalid
from repro.store.record import DataInput, FileEntry, Record
from repro.units import human_bytes, plural

# --------------------------------------------------------------------------- command


_FLAG = re.compile(r"^--?([A-Za-z_][\w.-]*)(=.*)?$")


def _param_name(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _argv_skeleton(argv: list[str], params: dict[str, Any]) -> list[str]:
    """argv with the hyper-parameter flags and values taken out, to see changes params do not explain."""
    out: list[str] = []
    skip = False
    for i, token in enumerate(argv):
        if skip:
            skip = False
            continue
        m = _FLAG.match(token)
        if m and _param_name(m.group(1)) in params:
            if m.group(2) is None and i + 1 < len(argv) and not _FLAG.match(argv[i + 1]):
                skip = True
            continue
        out.append(token)
    return out


def diff_command(a: Record, b: Record, read: SafeReader) -> Section:
    """The command section: hyper-parameters, logged params, argv, cwd and config files."""
    ca, cb = a.command, b.command
    changes = dict_changes(ca.params, cb.params, "param")
    changes += dict_changes(a.results.params, b.results.params, "logged", prefix="logged:")
    # A flag added or removed is a hyper-parameter row already: the skeleton leaves out both sides' flags.
    both = {**ca.params, **cb.params}
    skel_a = _argv_skeleton(ca.argv, both)
    skel_b = _argv_skeleton(cb.argv, both)
    if skel_a != skel_b:
        changes.append(
            Change(key="argv", kind="changed", scope="argv", old=shlex.join(ca.argv), new=shlex.join(cb.argv))
        )
    changes += scalar("cwd", ca.cwd, cb.cwd, "argv")
    changes += scalar("nproc_per_node", ca.nproc_per_node, cb.nproc_per_node, "argv")
    for c in file_changes(ca.config_files, cb.config_files, "config"):
        add_line_counts(c, ca.config_files, cb.config_files, read)
        changes.append(c)
    params = [c for c in changes if c.scope in ("param", "logged", "config")]
    summary = ", ".join(change_phrase(c) for c in params[:6])
    if len(params) > 6:
        summary += f" (+{len(params) - 6} more)"
    if not summary and changes:
        summary = "command line changed"
    return Section(name="", title="", changes=changes, summary=summary)


# --------------------------------------------------------------------------- code


def diff_code(a: Record, b: Record, read: SafeReader, with_patch: bool) -> Section:
    """The code section: git facts, changed files or the uncommitted patch, and their diff if asked."""
    ca, cb = a.code, b.code
    changes: list[Change] = []
    notes: list[str] = []
    patches: list[str] = []
    changes += scalar("kind", ca.kind, cb.kind, "git")
    changes += scalar("commit", ca.commit, cb.commit, "git")
    changes += scalar("branch", ca.branch, cb.branch, "git")
    changes += scalar("remote", ca.remote, cb.remote, "git")
    changes += scalar("dirty", ca.dirty, cb.dirty, "git")
    if ca.commit and cb.commit and ca.commit != cb.commit and not (ca.files and cb.files):
        notes.append(f"files changed between the commits: git diff --stat {ca.commit[:12]} {cb.commit[:12]}")

    # Recorded file contents say everything the patch and the untracked list say, once per file.
    recorded = bool(ca.files or cb.files)
    scopes = [("file", ca.files, cb.files)] if recorded else [("untracked", ca.untracked, cb.untracked)]
    for scope, fa, fb in scopes:
        for c in file_changes(fa, fb, scope):
            add_line_counts(c, fa, fb, read)
            changes.append(c)
            if with_patch:
                patches.append(file_patch(c, fa, fb, read))

    if ca.patch != cb.patch and not recorded:
        pa, pb = read.text(ca.patch), read.text(cb.patch)
        if (ca.patch and pa is None) or (cb.patch and pb is None):
            changes.append(
                Change(
                    key="(uncommitted patch)",
                    kind="changed",
                    scope="patch",
                    detail="uncommitted changes differ (patch not available)",
                )
            )
        else:
            changes += patch_changes(pa or "", pb or "", patches if with_patch else None)

    # Files an earlier run wrote (a model.pt left in the working directory) are outputs, not code.
    left = {**ca.earlier_outputs, **cb.earlier_outputs}
    changes += [c for c in file_changes(ca.listed, cb.listed, "file") if c.key in left]
    for c in changes:
        if c.scope in ("file", "untracked") and c.key in left:
            c.scope, c.detail = "left", f"written by run {left[c.key]}"
    if [c.key for c in changes] == ["dirty"]:
        # The flag alone, with identical commit, patch and files, does not change what ran:
        # files outside the captured code (declared data, outputs) make git report dirty.
        side = "B" if cb.dirty else "A"
        notes.append(f"working tree marked dirty only in {side}; the recorded code is identical")
        changes = []
    files = [c for c in changes if c.scope in ("file", "untracked", "patch")]
    parts = []
    commit = next((c for c in changes if c.key == "commit"), None)
    if commit:
        parts.append(f"commit {_short(commit.old)} → {_short(commit.new)}")
    if files:
        plus = sum(c.lines[0] for c in files if c.lines)
        minus = sum(c.lines[1] for c in files if c.lines)
        parts.append(f"{plural(len(files), 'file')} changed (+{plus} −{minus})")
    elif any(c.key == "dirty" for c in changes):
        parts.append("working tree " + ("dirty" if cb.dirty else "clean") + " in B")
    earlier = [c for c in changes if c.scope == "left"]
    if earlier:
        parts.append(f"{plural(len(earlier), 'file')} earlier runs wrote")
    summary = ", ".join(parts) or ("code changed" if changes else "")
    patch = "".join(patches) if with_patch and patches else None
    return Section(
        name="",
        title="",
        changes=changes,
        summary=summary,
        groups=group_by_dir(files) if len(files) > MAX_GROUPS else [],
        patch=patch,
        notes=notes,
    )


def _short(value: Any) -> str:
    return str(value)[:12] if value else "—"


# --------------------------------------------------------------------------- data


def _entries(item: DataInput, read: SafeReader | None) -> list[FileEntry]:
    """An input's files; empty when its manifest blob cannot be read (the digest still differs)."""
    try:
        return item.entries(read or (lambda digest: None))
    except CapsuleInvalid:
        return []


def diff_data(a: Record, b: Record, read: SafeReader | None = None) -> Section:
    """The data section: declared inputs by digest and file (large manifests read through
    ``read``), and undeclared inputs."""
    ia = {i.path: i for i in a.data.inputs}
    ib = {i.path: i for i in b.data.inputs}
    changes: list[Change] = []
    changed_files: list[Change] = []
    for path in sorted(set(ia) | set(ib)):
        x, y = ia.get(path), ib.get(path)
        if y is None:
            assert x is not None
            changes.append(
                Change(
                    key=path,
                    kind="removed",
                    scope="input",
                    old=x.size,
                    detail=f"{plural(x.count or len(x.files), 'file')}, {human_bytes(x.size)}",
                )
            )
        elif x is None:
            changes.append(
                Change(
                    key=path,
                    kind="added",
                    scope="input",
                    new=y.size,
                    detail=f"{plural(y.count or len(y.files), 'file')}, {human_bytes(y.size)}",
                )
            )
        elif x.digest != y.digest:
            found = file_changes(_entries(x, read), _entries(y, read), "file")
            if not found:
                changes.append(
                    Change(
                        key=path,
                        kind="changed",
                        scope="input",
                        old=x.digest,
                        new=y.digest,
                        detail="directory digest changed",
                    )
                )
            changed_files += found
    changes += changed_files
    # Files read and not declared are compared above as inputs where the run recorded them (hashed);
    # the others (a record from before, a credential-looking file) only by name.
    undeclared_a, undeclared_b = set(a.data.undeclared) - set(ia), set(b.data.undeclared) - set(ib)
    for path in sorted(undeclared_b - undeclared_a):
        changes.append(Change(key=path, kind="added", scope="undeclared", detail="read but not declared"))
    for path in sorted(undeclared_a - undeclared_b):
        changes.append(Change(key=path, kind="removed", scope="undeclared", detail="read but not declared"))
    notes = []
    if undeclared_a or undeclared_b:
        notes.append(f"undeclared inputs (read, not hashed): A {len(undeclared_a)}, B {len(undeclared_b)}")
    inputs = [c for c in changes if c.scope == "input"]
    parts = [files_summary(changed_files)] if changed_files else []
    parts += [f"input {c.key} {c.kind}" for c in inputs]
    summary = ", ".join(p for p in parts if p)
    if not summary and changes:
        summary = "undeclared inputs differ"
    return Section(
        name="", title="", changes=changes, summary=summary, groups=group_by_dir(changed_files), notes=notes
    )
