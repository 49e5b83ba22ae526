"""Capsule vs capsule: what differs between two runs, and which difference most likely matters.

`diff_records` compares two `Record`s section by section and returns a `DiffResult`
(pure data). Nothing here prints, reads the store or imports click; `repro.ui.diff`
renders the result as text, Markdown or JSON. The JSON layout is documented in
``docs/diff.md`` and versioned by `DIFF_FORMAT`.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from repro.capsule import FileEntry, Record
from repro.units import human_bytes, plural

DIFF_FORMAT = "repro.diff/v1"

ReadBlob = Callable[[str], "bytes | None"]

# Section names, in the order they are compared and shown.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("command", "Command and hyper-parameters"),
    ("code", "Code"),
    ("data", "Data"),
    ("dependencies", "Dependencies"),
    ("seeds", "Seeds"),
    ("determinism", "Determinism"),
    ("environment", "Environment and hardware"),
    ("metrics", "Metrics"),
    ("outputs", "Outputs"),
)

# Cause ranks: lower is more likely. Changed inputs beat dependencies beat seeds beat
# determinism settings beat hardware; gaps leave room for finer categories.
RANK_DATA = 10
RANK_PARAMS = 20
RANK_CODE = 30
RANK_WORLD = 35
RANK_DEPS = 40
RANK_SOFTWARE = 45
RANK_IMAGE = 48
RANK_SEEDS = 50
RANK_DETERMINISM = 60
RANK_HARDWARE = 70
RANK_HARDWARE_STRICT = 80
RANK_NONDETERMINISM = 90

MAX_GROUPS = 20  # directory groups kept per file section before grouping one level up


# --------------------------------------------------------------------------- result data


@dataclass
class Change:
    """One difference inside a section.

    kind: ``added`` | ``removed`` | ``changed`` | ``upgraded`` | ``downgraded``.
    scope: what sort of item ``key`` names inside its section (``param``, ``file``,
    ``lockfile``, ``knob`` …; see docs/diff.md). ``old``/``new`` are the values in run A
    and run B (None where absent); ``delta`` is ``new - old`` for numbers; ``lines`` is
    ``(added, removed)`` line counts for text files.
    """

    key: str
    kind: str
    scope: str = ""
    old: Any = None
    new: Any = None
    delta: float | None = None
    lines: tuple[int, int] | None = None
    detail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {
            "key": self.key,
            "kind": self.kind,
            "scope": self.scope,
            "old": _jsonable(self.old),
            "new": _jsonable(self.new),
            "delta": _jsonable(self.delta),
            "lines": None if self.lines is None else {"added": self.lines[0], "removed": self.lines[1]},
            "detail": self.detail,
        }


@dataclass
class DirGroup:
    """File changes of one directory summarised: counts and bytes."""

    dir: str
    added: int = 0
    removed: int = 0
    changed: int = 0
    bytes_added: int = 0
    bytes_removed: int = 0
    bytes_delta: int = 0

    @property
    def count(self) -> int:
        return self.added + self.removed + self.changed

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {
            "dir": self.dir,
            "added": self.added,
            "removed": self.removed,
            "changed": self.changed,
            "bytes_added": self.bytes_added,
            "bytes_removed": self.bytes_removed,
            "bytes_delta": self.bytes_delta,
        }


@dataclass
class Divergence:
    """The first step at which two metric series differ."""

    metric: str
    step: int | None
    a: float | None
    b: float | None

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {"metric": self.metric, "step": self.step, "a": _jsonable(self.a), "b": _jsonable(self.b)}


@dataclass
class Section:
    """One compared part of the record (command, code, data …) and its differences."""

    name: str
    title: str
    changes: list[Change] = field(default_factory=list)
    summary: str = ""
    groups: list[DirGroup] = field(default_factory=list)
    divergence: Divergence | None = None
    patch: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def differs(self) -> bool:
        return bool(self.changes) or self.divergence is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {
            "name": self.name,
            "title": self.title,
            "differs": self.differs,
            "summary": self.summary,
            "changes": [c.to_dict() for c in self.changes],
            "groups": [g.to_dict() for g in self.groups],
            "divergence": self.divergence.to_dict() if self.divergence else None,
            "patch": self.patch,
            "notes": list(self.notes),
        }


@dataclass
class Cause:
    """A likely cause of the difference in results, with a one-line reason."""

    section: str
    category: str
    reason: str
    rank: int
    keys: list[str] = field(default_factory=list)

    def to_dict(self, position: int) -> dict[str, Any]:
        """Plain data, stable key order; ``position`` is 1 for the most likely cause."""
        return {
            "position": position,
            "section": self.section,
            "category": self.category,
            "reason": self.reason,
            "rank": self.rank,
            "keys": list(self.keys),
        }


@dataclass
class RunSummary:
    """Which run a side of the diff is."""

    id: str
    created: str
    status: str
    mode: str
    final_metrics: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, stable key order."""
        return {
            "id": self.id,
            "created": self.created,
            "status": self.status,
            "mode": self.mode,
            "final_metrics": {k: _jsonable(v) for k, v in self.final_metrics.items()},
        }


@dataclass
class DiffResult:
    """Everything `repro diff` found: the sections, ranked likely causes, and verdict flags."""

    a: RunSummary
    b: RunSummary
    sections: list[Section]
    likely_causes: list[Cause]
    results_differ: bool

    @property
    def differs(self) -> bool:
        return any(s.differs for s in self.sections)

    def section(self, name: str) -> Section:
        """The section called ``name``.

        Raises:
            KeyError: no section of that name.
        """
        for s in self.sections:
            if s.name == name:
                return s
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON layout (docs/diff.md), stable key order."""
        return {
            "format": DIFF_FORMAT,
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "differs": self.differs,
            "results_differ": self.results_differ,
            "likely_causes": [c.to_dict(i + 1) for i, c in enumerate(self.likely_causes)],
            "sections": [s.to_dict() for s in self.sections],
        }


# --------------------------------------------------------------------------- entry point


def diff_records(a: Record, b: Record, read_blob: ReadBlob, *, code: bool = False) -> DiffResult:
    """Compare run A with run B; ``code=True`` adds the unified diff of changed source files."""
    reader = _SafeReader(read_blob)
    sections = [
        _section("command", _diff_command(a, b, reader)),
        _section("code", _diff_code(a, b, reader, with_patch=code)),
        _section("data", _diff_data(a, b)),
        _section("dependencies", _diff_deps(a, b, reader)),
        _section("seeds", _diff_seeds(a, b)),
        _section("determinism", _diff_determinism(a, b)),
        _section("environment", _diff_env(a, b)),
        _section("metrics", _diff_metrics(a, b, reader)),
        _section("outputs", _diff_outputs(a, b)),
    ]
    by_name = {s.name: s for s in sections}
    results_differ = by_name["metrics"].differs or by_name["outputs"].differs
    causes = rank_causes(by_name, a, b, results_differ)
    return DiffResult(
        a=_summary(a), b=_summary(b), sections=sections, likely_causes=causes, results_differ=results_differ
    )


def _summary(r: Record) -> RunSummary:
    return RunSummary(
        id=r.id,
        created=r.created,
        status=r.results.status,
        mode=r.determinism.mode,
        final_metrics=dict(r.results.final_metrics),
    )


def _section(name: str, body: Section) -> Section:
    body.name = name
    body.title = dict(SECTIONS)[name]
    return body


class _SafeReader:
    """read_blob with caching, where a failing reader counts as a missing blob."""

    def __init__(self, read_blob: ReadBlob) -> None:
        self._read = read_blob
        self._cache: dict[str, bytes | None] = {}

    def __call__(self, digest: str | None) -> bytes | None:
        if not digest:
            return None
        if digest not in self._cache:
            try:
                self._cache[digest] = self._read(digest)
            except (OSError, KeyError, ValueError):
                self._cache[digest] = None
        return self._cache[digest]

    def text(self, digest: str | None) -> str | None:
        raw = self(digest)
        return None if raw is None else raw.decode("utf-8", errors="replace")


# --------------------------------------------------------------------------- helpers


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return bool(x == y)


def _scalar(key: str, old: Any, new: Any, scope: str = "") -> list[Change]:
    """A `changed` (or added/removed) change when two values differ."""
    if _same(old, new):
        return []
    if old is None or old == "" or old == [] or old == {}:
        kind = "added"
    elif new is None or new == "" or new == [] or new == {}:
        kind = "removed"
    else:
        kind = "changed"
    return [Change(key=key, kind=kind, scope=scope, old=old, new=new, delta=_delta(old, new))]


def _delta(old: Any, new: Any) -> float | None:
    if isinstance(old, bool) or isinstance(new, bool):
        return None
    if isinstance(old, int | float) and isinstance(new, int | float):
        d = new - old
        return d if isinstance(d, int) else float(d)
    return None


def _dict_changes(a: dict[str, Any], b: dict[str, Any], scope: str, prefix: str = "") -> list[Change]:
    changes: list[Change] = []
    for key in sorted(set(a) | set(b)):
        if key not in b:
            changes.append(Change(key=prefix + key, kind="removed", scope=scope, old=a[key]))
        elif key not in a:
            changes.append(Change(key=prefix + key, kind="added", scope=scope, new=b[key]))
        else:
            changes.extend(_scalar(prefix + key, a[key], b[key], scope))
    return changes


def _line_counts(old: str, new: str) -> tuple[int, int]:
    added = removed = 0
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def _fmt_value(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | dict):
        return json.dumps(value, default=str)
    return str(value)


def _signed_bytes(n: int) -> str:
    return ("+" if n >= 0 else "−") + human_bytes(abs(n))


# --------------------------------------------------------------------------- files


def _file_changes(a: Iterable[FileEntry], b: Iterable[FileEntry], scope: str) -> list[Change]:
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


def _files_summary(changes: list[Change], noun: str = "file") -> str:
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


# --------------------------------------------------------------------------- command


_FLAG = re.compile(r"^--?([A-Za-z_][\w.-]*)(=.*)?$")


def _param_name(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _argv_skeleton(argv: list[str], params: dict[str, Any]) -> list[str]:
    """argv with the hyper-parameter values taken out, to see changes params do not explain."""
    out: list[str] = []
    skip = False
    for i, token in enumerate(argv):
        if skip:
            skip = False
            continue
        m = _FLAG.match(token)
        if m and _param_name(m.group(1)) in params:
            out.append(token.split("=", 1)[0])
            if m.group(2) is None and i + 1 < len(argv) and not _FLAG.match(argv[i + 1]):
                skip = True
            continue
        out.append(token)
    return out


def _diff_command(a: Record, b: Record, read: _SafeReader) -> Section:
    ca, cb = a.command, b.command
    changes = _dict_changes(ca.params, cb.params, "param")
    changes += _dict_changes(a.results.params, b.results.params, "logged", prefix="logged:")
    skel_a = _argv_skeleton(ca.argv, ca.params)
    skel_b = _argv_skeleton(cb.argv, cb.params)
    if skel_a != skel_b:
        changes.append(
            Change(key="argv", kind="changed", scope="argv", old=shlex.join(ca.argv), new=shlex.join(cb.argv))
        )
    changes += _scalar("cwd", ca.cwd, cb.cwd, "argv")
    changes += _scalar("nproc_per_node", ca.nproc_per_node, cb.nproc_per_node, "argv")
    for c in _file_changes(ca.config_files, cb.config_files, "config"):
        _add_line_counts(c, ca.config_files, cb.config_files, read)
        changes.append(c)
    params = [c for c in changes if c.scope in ("param", "logged", "config")]
    summary = ", ".join(_change_phrase(c) for c in params[:6])
    if len(params) > 6:
        summary += f" (+{len(params) - 6} more)"
    if not summary and changes:
        summary = "command line changed"
    return Section(name="", title="", changes=changes, summary=summary)


def _change_phrase(c: Change) -> str:
    if c.scope == "config":
        return f"{c.key} {c.kind}"
    name = c.key
    if c.kind == "added":
        return f"{name} = {_fmt_value(c.new)} (added)"
    if c.kind == "removed":
        return f"{name} = {_fmt_value(c.old)} (removed)"
    return f"{name} {_fmt_value(c.old)} → {_fmt_value(c.new)}"


def _add_line_counts(c: Change, a: list[FileEntry], b: list[FileEntry], read: _SafeReader) -> None:
    ea = {e.path: e for e in a}.get(c.key)
    eb = {e.path: e for e in b}.get(c.key)
    ta = read.text(ea.hash) if ea and ea.stored else ("" if ea is None else None)
    tb = read.text(eb.hash) if eb and eb.stored else ("" if eb is None else None)
    if ta is not None and tb is not None and not (_binary(ta) or _binary(tb)):
        c.lines = _line_counts(ta, tb)
        c.detail = f"+{c.lines[0]} −{c.lines[1]}"


def _binary(text: str) -> bool:
    return "\x00" in text[:8192]


# --------------------------------------------------------------------------- code


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


def _patch_counts(part: str) -> tuple[int, int]:
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


def _post_image(part: str) -> list[str]:
    lines: list[str] = []
    in_hunk = False
    for line in part.splitlines():
        if line.startswith("@@"):
            in_hunk = True
            lines.append("@@")
        elif in_hunk and line[:1] in ("+", " "):
            lines.append(line[1:])
    return lines


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


def _diff_code(a: Record, b: Record, read: _SafeReader, with_patch: bool) -> Section:
    ca, cb = a.code, b.code
    changes: list[Change] = []
    notes: list[str] = []
    patches: list[str] = []
    changes += _scalar("kind", ca.kind, cb.kind, "git")
    changes += _scalar("commit", ca.commit, cb.commit, "git")
    changes += _scalar("branch", ca.branch, cb.branch, "git")
    changes += _scalar("remote", ca.remote, cb.remote, "git")
    changes += _scalar("dirty", ca.dirty, cb.dirty, "git")
    if ca.commit and cb.commit and ca.commit != cb.commit and not (ca.files and cb.files):
        notes.append(f"files changed between the commits: git diff --stat {ca.commit[:12]} {cb.commit[:12]}")

    # Recorded file contents say everything the patch and the untracked list say, once per file.
    recorded = bool(ca.files or cb.files)
    scopes = [("file", ca.files, cb.files)] if recorded else [("untracked", ca.untracked, cb.untracked)]
    for scope, fa, fb in scopes:
        for c in _file_changes(fa, fb, scope):
            _add_line_counts(c, fa, fb, read)
            changes.append(c)
            if with_patch:
                patches.append(_file_patch(c, fa, fb, read))

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
            changes += _patch_changes(pa or "", pb or "", patches if with_patch else None)

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


def _patch_changes(pa: str, pb: str, patches: list[str] | None) -> list[Change]:
    sa, sb = split_patch(pa), split_patch(pb)
    changes: list[Change] = []
    for path in sorted(set(sa) | set(sb)):
        x, y = sa.get(path), sb.get(path)
        if x == y:
            continue
        if x is None:
            assert y is not None
            lines = _patch_counts(y)
            detail = "uncommitted change in B only"
            text = y
        elif y is None:
            removed, added = _patch_counts(x)
            lines = (added, removed)
            detail = "uncommitted change in A only"
            text = reverse_patch(x)
        else:
            lines = _line_counts("\n".join(_post_image(x)), "\n".join(_post_image(y)))
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


def _file_patch(c: Change, fa: list[FileEntry], fb: list[FileEntry], read: _SafeReader) -> str:
    ea = {e.path: e for e in fa}.get(c.key)
    eb = {e.path: e for e in fb}.get(c.key)
    ta = "" if ea is None else (read.text(ea.hash) if ea.stored else None)
    tb = "" if eb is None else (read.text(eb.hash) if eb.stored else None)
    if ta is None or tb is None:
        return f"# {c.key}: content not stored in the capsule\n"
    if _binary(ta) or _binary(tb):
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


# --------------------------------------------------------------------------- data


def _diff_data(a: Record, b: Record) -> Section:
    ia = {i.path: i for i in a.data.inputs}
    ib = {i.path: i for i in b.data.inputs}
    changes: list[Change] = []
    file_changes: list[Change] = []
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
                    detail=f"{plural(len(x.files), 'file')}, {human_bytes(x.size)}",
                )
            )
        elif x is None:
            changes.append(
                Change(
                    key=path,
                    kind="added",
                    scope="input",
                    new=y.size,
                    detail=f"{plural(len(y.files), 'file')}, {human_bytes(y.size)}",
                )
            )
        elif x.digest != y.digest:
            found = _file_changes(x.files, y.files, "file")
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
            file_changes += found
    changes += file_changes
    undeclared_a, undeclared_b = set(a.data.undeclared), set(b.data.undeclared)
    for path in sorted(undeclared_b - undeclared_a):
        changes.append(Change(key=path, kind="added", scope="undeclared", detail="read but not declared"))
    for path in sorted(undeclared_a - undeclared_b):
        changes.append(Change(key=path, kind="removed", scope="undeclared", detail="read but not declared"))
    notes = []
    if a.data.undeclared or b.data.undeclared:
        notes.append(
            f"undeclared inputs (read, not hashed): A {len(a.data.undeclared)}, B {len(b.data.undeclared)}"
        )
    inputs = [c for c in changes if c.scope == "input"]
    parts = [_files_summary(file_changes)] if file_changes else []
    parts += [f"input {c.key} {c.kind}" for c in inputs]
    summary = ", ".join(p for p in parts if p)
    if not summary and changes:
        summary = "undeclared inputs differ"
    return Section(
        name="", title="", changes=changes, summary=summary, groups=group_by_dir(file_changes), notes=notes
    )


# --------------------------------------------------------------------------- dependencies


_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*===?\s*([^\s;\\#]+)")


def canonical_name(name: str) -> str:
    """PEP 503 normalised package name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pins(lines: Iterable[str]) -> dict[str, str]:
    """``name==version`` lines (requirements, lockfile, pip freeze) → {canonical name: version}."""
    pins: dict[str, str] = {}
    for line in lines:
        m = _REQ.match(line)
        if m:
            pins[canonical_name(m.group(1))] = m.group(2)
    return pins


def compare_versions(old: str, new: str) -> int:
    """-1, 0 or 1 as ``old`` is lower than, equal to or higher than ``new`` (PEP 440 where it parses)."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - packaging ships with pip-tools
        return _fallback_compare(old, new)
    try:
        va, vb = Version(old), Version(new)
    except InvalidVersion:
        return _fallback_compare(old, new)
    return (va > vb) - (va < vb)


def _fallback_compare(old: str, new: str) -> int:
    def key(v: str) -> list[tuple[int, Any]]:
        return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[.+\-_]", v) if p]

    ka, kb = key(old), key(new)
    return (ka > kb) - (ka < kb)


def _pin_changes(a: dict[str, str], b: dict[str, str], scope: str) -> list[Change]:
    changes: list[Change] = []
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if x == y:
            continue
        if x is None:
            changes.append(Change(key=name, kind="added", scope=scope, new=y))
        elif y is None:
            changes.append(Change(key=name, kind="removed", scope=scope, old=x))
        else:
            order = compare_versions(x, y)
            kind = "upgraded" if order < 0 else "downgraded" if order > 0 else "changed"
            changes.append(Change(key=name, kind=kind, scope=scope, old=x, new=y))
    return changes


def _lock_pins(r: Record, read: _SafeReader) -> dict[str, str]:
    if r.deps.requirements:
        return parse_pins(r.deps.requirements)
    text = read.text(r.deps.lock_blob)
    return parse_pins(text.splitlines()) if text else {}


def _diff_deps(a: Record, b: Record, read: _SafeReader) -> Section:
    da, db = a.deps, b.deps
    changes = _pin_changes(_lock_pins(a, read), _lock_pins(b, read), "lockfile")
    if not changes and da.lock_blob != db.lock_blob and da.lock_blob and db.lock_blob:
        changes.append(
            Change(
                key="(lockfile)",
                kind="changed",
                scope="lockfile",
                detail="lockfile content differs (hashes or markers)",
            )
        )
    seen = {(c.key, c.kind, c.old, c.new) for c in changes}
    for c in _pin_changes(parse_pins(da.freeze), parse_pins(db.freeze), "installed"):
        if (c.key, c.kind, c.old, c.new) not in seen:
            changes.append(c)
    changes += _scalar("lockfile path", da.lockfile, db.lockfile, "lockfile")
    if da.site_fingerprint and db.site_fingerprint:
        changes += _scalar("site-packages fingerprint", da.site_fingerprint, db.site_fingerprint, "installed")
    ia, ib = da.image, db.image
    if ia is not None or ib is not None:
        for attr in ("base", "base_id", "template", "tag", "id"):
            changes += _scalar(f"image.{attr}", getattr(ia, attr, None), getattr(ib, attr, None), "image")
        if ia is not None and ib is not None and ia.dockerfile != ib.dockerfile:
            changes.append(
                Change(
                    key="image.dockerfile",
                    kind="changed",
                    scope="image",
                    detail="rendered Dockerfile differs",
                )
            )
    pkgs = [
        c
        for c in changes
        if c.scope in ("lockfile", "installed") and " " not in c.key and not c.key.startswith("(")
    ]
    parts = [_pkg_phrase(c) for c in pkgs[:4]]
    if len(pkgs) > 4:
        parts.append(f"+{len(pkgs) - 4} more")
    if any(c.scope == "image" and c.key in ("image.base", "image.base_id") for c in changes):
        parts.append("base image changed")
    elif any(c.scope == "image" for c in changes):
        parts.append("image differs")
    summary = ", ".join(parts) or ("dependencies changed" if changes else "")
    return Section(name="", title="", changes=changes, summary=summary)


def _pkg_phrase(c: Change) -> str:
    if c.kind == "added":
        return f"{c.key} {c.new} added"
    if c.kind == "removed":
        return f"{c.key} {c.old} removed"
    return f"{c.key} {c.old} → {c.new}"


# --------------------------------------------------------------------------- seeds, determinism


def _diff_seeds(a: Record, b: Record) -> Section:
    sa, sb = a.seeds, b.seeds
    changes = _scalar("master", sa.master, sb.master, "seed")
    changes += _scalar("drawn", sa.drawn, sb.drawn, "seed")
    changes += _scalar("PYTHONHASHSEED", sa.pythonhashseed, sb.pythonhashseed, "seed")
    if not changes or changes[0].key != "master":
        changes += _dict_changes(sa.derived, sb.derived, "derived")
        flat_a = {f"rank{r}.{k}": v for r, d in sa.per_rank.items() for k, v in d.items()}
        flat_b = {f"rank{r}.{k}": v for r, d in sb.per_rank.items() for k, v in d.items()}
        changes += _dict_changes(flat_a, flat_b, "derived")
    master = next((c for c in changes if c.key == "master"), None)
    if master:
        summary = f"seed {master.old} → {master.new}" + (" (drawn)" if sb.drawn or sa.drawn else "")
    else:
        summary = ", ".join(f"{c.key} {_fmt_value(c.old)} → {_fmt_value(c.new)}" for c in changes[:3])
    return Section(name="", title="", changes=changes, summary=summary)


def _diff_determinism(a: Record, b: Record) -> Section:
    da, db = a.determinism, b.determinism
    changes = _scalar("mode", da.mode, db.mode, "mode")
    changes += _scalar("threads", da.threads, db.threads, "knob")
    changes += _scalar("isa", da.isa, db.isa, "knob")
    changes += _dict_changes(da.knobs, db.knobs, "knob")
    changes += _dict_changes(da.env, db.env, "env")
    summary = ", ".join(_change_phrase(c) for c in changes[:4])
    if len(changes) > 4:
        summary += f" (+{len(changes) - 4} more)"
    return Section(name="", title="", changes=changes, summary=summary)


# --------------------------------------------------------------------------- environment

_SOFTWARE = ("python", "implementation", "torch", "cuda", "cudnn", "nccl")
_HARDWARE = ("os", "machine", "cpu_model", "cpu_count", "driver")


def _gpu_summary(gpus: list[dict[str, Any]]) -> str | None:
    if not gpus:
        return None
    names: dict[str, int] = {}
    for g in gpus:
        name = str(g.get("name") or g.get("model") or "GPU")
        names[name] = names.get(name, 0) + 1
    return ", ".join(f"{n}× {name}" for name, n in names.items())


def _diff_env(a: Record, b: Record) -> Section:
    ea, eb = a.env, b.env
    changes: list[Change] = []
    for attr in _SOFTWARE:
        changes += _scalar(attr, getattr(ea, attr), getattr(eb, attr), "software")
    for attr in _HARDWARE:
        changes += _scalar(attr, getattr(ea, attr), getattr(eb, attr), "hardware")
    changes += _scalar("gpus", _gpu_summary(ea.gpus), _gpu_summary(eb.gpus), "hardware")
    fa, fb = set(ea.cpu_flags), set(eb.cpu_flags)
    if fa != fb and fa and fb:
        only_a, only_b = sorted(fa - fb), sorted(fb - fa)
        changes.append(
            Change(
                key="cpu_flags",
                kind="changed",
                scope="hardware",
                old=only_a,
                new=only_b,
                detail=f"{len(only_a)} only in A, {len(only_b)} only in B",
            )
        )
    changes += _scalar("world_size", ea.world_size, eb.world_size, "world")
    changes += _dict_changes(ea.rank_devices, eb.rank_devices, "world", prefix="rank_device:")
    changes += _dict_changes(ea.variables, eb.variables, "variable", prefix="$")
    changes += _scalar("backend", a.backend.name, b.backend.name, "backend")
    summary = ", ".join(
        _change_phrase(c) if c.key != "cpu_flags" else "CPU flags differ" for c in changes[:4]
    )
    if len(changes) > 4:
        summary += f" (+{len(changes) - 4} more)"
    return Section(name="", title="", changes=changes, summary=summary)


# --------------------------------------------------------------------------- metrics


def metric_rows(record: Record, read_blob: ReadBlob) -> list[dict[str, Any]]:
    """The run's metrics series (rows of name/value/step) from its metrics.jsonl blob; [] when absent."""
    text = _SafeReader(read_blob).text(record.results.metrics)
    rows: list[dict[str, Any]] = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "name" in row and "value" in row:
            rows.append(row)
    return rows


def series(rows: list[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """Rows → {metric: [(step, value), …]}; rows without a step count from 0 in order."""
    out: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        name = str(row["name"])
        points = out.setdefault(name, [])
        step = row.get("step")
        try:
            value = float(row["value"])
        except (TypeError, ValueError):
            continue
        points.append((int(step) if isinstance(step, int | float) else len(points), value))
    return out


def first_divergence(rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]]) -> Divergence | None:
    """The earliest step (then metric name) where the two series differ, or None."""
    sa, sb = series(rows_a), series(rows_b)
    found: list[tuple[int, str, float | None, float | None]] = []
    for name in sorted(set(sa) & set(sb)):
        pa, pb = dict(sa[name]), dict(sb[name])
        for step in sorted(set(pa) | set(pb)):
            x, y = pa.get(step), pb.get(step)
            if x is None or y is None or not _same(x, y):
                found.append((step, name, x, y))
                break
    if not found:
        return None
    step, name, x, y = min(found, key=lambda f: (f[0], f[1]))
    return Divergence(metric=name, step=step, a=x, b=y)


def _diff_metrics(a: Record, b: Record, read: _SafeReader) -> Section:
    fa, fb = a.results.final_metrics, b.results.final_metrics
    changes = _dict_changes(fa, fb, "final")
    rows_a = metric_rows(a, read)
    rows_b = metric_rows(b, read)
    divergence = first_divergence(rows_a, rows_b)
    names_a, names_b = set(series(rows_a)), set(series(rows_b))
    for name in sorted(names_b - names_a - set(fb)):
        changes.append(Change(key=name, kind="added", scope="series"))
    for name in sorted(names_a - names_b - set(fa)):
        changes.append(Change(key=name, kind="removed", scope="series"))
    parts = [_metric_phrase(c) for c in changes[:3] if c.scope == "final"]
    if divergence is not None:
        parts.append(f"series diverge at step {divergence.step} ({divergence.metric})")
    return Section(name="", title="", changes=changes, summary=", ".join(parts), divergence=divergence)


def _metric_phrase(c: Change) -> str:
    if c.kind == "changed" and c.delta is not None:
        sign = "+" if c.delta >= 0 else "−"
        return f"{c.key} {_fmt_value(c.old)} → {_fmt_value(c.new)} ({sign}{abs(c.delta):.4g})"
    return _change_phrase(c)


# --------------------------------------------------------------------------- outputs


def _diff_outputs(a: Record, b: Record) -> Section:
    ra, rb = a.results, b.results
    changes = _scalar("status", ra.status, rb.status, "status")
    changes += _scalar("exit_code", ra.exit_code, rb.exit_code, "status")
    files = _file_changes(ra.outputs, rb.outputs, "file")
    changes += files
    parts = []
    if any(c.key == "status" for c in changes):
        parts.append(f"status {ra.status} → {rb.status}")
    if files:
        parts.append(_files_summary(files))
    return Section(
        name="",
        title="",
        changes=changes,
        summary=", ".join(parts),
        groups=group_by_dir(files) if len(files) > MAX_GROUPS else [],
    )


# --------------------------------------------------------------------------- likely causes


def rank_causes(sections: dict[str, Section], a: Record, b: Record, results_differ: bool) -> list[Cause]:
    """Rank the differences by how likely each is to have changed the results (first = most likely)."""
    causes = _input_causes(sections) + _dependency_causes(sections) + _setting_causes(sections)
    causes += _environment_causes(sections["environment"], a, b)
    if results_differ and not causes:
        modes = {a.determinism.mode, b.determinism.mode}
        mode = a.determinism.mode if len(modes) == 1 else f"{a.determinism.mode}/{b.determinism.mode}"
        reason = f"no recorded difference — non-determinism under mode {mode}"
        if a.data.undeclared or b.data.undeclared:
            reason += "; or an undeclared input changed"
        causes.append(Cause("outputs", "nondeterminism", reason, RANK_NONDETERMINISM, []))
    causes.sort(key=lambda c: c.rank)
    return causes


def _keys(changes: list[Change], limit: int = 50) -> list[str]:
    return [c.key for c in changes[:limit]]


def _input_causes(sections: dict[str, Section]) -> list[Cause]:
    causes: list[Cause] = []
    data = sections["data"]
    if data.differs:
        causes.append(
            Cause("data", "input", f"data changed: {_data_reason(data)}", RANK_DATA, _keys(data.changes))
        )
    cmd = sections["command"]
    params = [c for c in cmd.changes if c.scope in ("param", "logged", "config")]
    if params:
        reason = f"hyper-parameters changed: {cmd.summary}"
        causes.append(Cause("command", "input", reason, RANK_PARAMS, _keys(params)))
    other = [c for c in cmd.changes if c.scope == "argv"]
    if other:
        reason = "command changed: " + ", ".join(_change_phrase(c) for c in other)
        causes.append(Cause("command", "input", reason, RANK_PARAMS + 1, _keys(other)))
    code = sections["code"]
    if code.differs:
        causes.append(Cause("code", "input", f"code changed: {code.summary}", RANK_CODE, _keys(code.changes)))
    world = [c for c in sections["environment"].changes if c.scope == "world"]
    if world:
        reason = (
            "world size changed: "
            + ", ".join(_change_phrase(c) for c in world[:2])
            + " (data sharding, effective batch size)"
        )
        causes.append(Cause("environment", "input", reason, RANK_WORLD, _keys(world)))
    return causes


_IMAGE_INPUTS = ("image.base", "image.base_id", "image.dockerfile", "image.template")


def _dependency_causes(sections: dict[str, Section]) -> list[Cause]:
    causes: list[Cause] = []
    deps = sections["dependencies"]
    pkgs = [c for c in deps.changes if c.scope in ("lockfile", "installed")]
    image = [c for c in deps.changes if c.scope == "image"]
    if pkgs or any(c.key in _IMAGE_INPUTS for c in image):
        reason = f"dependencies changed: {deps.summary}"
        causes.append(Cause("dependencies", "dependency", reason, RANK_DEPS, _keys(deps.changes)))
    elif image:
        reason = "image differs with the same lockfile: " + ", ".join(c.key for c in image)
        causes.append(Cause("dependencies", "dependency", reason, RANK_IMAGE, _keys(image)))
    software = [c for c in sections["environment"].changes if c.scope == "software"]
    if software:
        reason = "software versions changed: " + ", ".join(_change_phrase(c) for c in software)
        causes.append(Cause("environment", "dependency", reason, RANK_SOFTWARE, _keys(software)))
    return causes


def _setting_causes(sections: dict[str, Section]) -> list[Cause]:
    causes: list[Cause] = []
    seeds = sections["seeds"]
    if seeds.differs:
        causes.append(
            Cause("seeds", "seed", f"seed changed: {seeds.summary}", RANK_SEEDS, _keys(seeds.changes))
        )
    det = sections["determinism"]
    if det.differs:
        reason = f"determinism settings changed: {det.summary}"
        causes.append(Cause("determinism", "determinism", reason, RANK_DETERMINISM, _keys(det.changes)))
    return causes


def _environment_causes(env: Section, a: Record, b: Record) -> list[Cause]:
    hardware = [c for c in env.changes if c.scope in ("hardware", "variable", "backend")]
    if not hardware:
        return []
    phrase = ", ".join(_hw_phrase(c) for c in hardware[:3])
    if len(hardware) > 3:
        phrase += f" (+{len(hardware) - 3} more)"
    if a.determinism.mode == "strict" and b.determinism.mode == "strict":
        reason = f"environment differs under strict mode (pinned, so unlikely): {phrase}"
        return [Cause("environment", "hardware", reason, RANK_HARDWARE_STRICT, _keys(hardware))]
    modes = "/".join(sorted({a.determinism.mode, b.determinism.mode}))
    reason = f"environment differs under mode {modes}: {phrase}"
    return [Cause("environment", "hardware", reason, RANK_HARDWARE, _keys(hardware))]


def _hw_phrase(c: Change) -> str:
    if c.key == "cpu_flags":
        return "CPU flags differ"
    return _change_phrase(c)


def _data_reason(data: Section) -> str:
    files = [c for c in data.changes if c.scope == "file"]
    if not files:
        return data.summary
    dirs = sorted({g.dir for g in data.groups})
    where = f" in {dirs[0]}" if len(dirs) == 1 else f" in {len(dirs)} directories"
    named = ""
    if len(files) <= 3:
        kinds = {c.kind for c in files}
        names = [PurePosixPath(c.key).name if len(dirs) == 1 else c.key for c in files]
        if len(kinds) > 1:
            names = [f"{n} {c.kind}" for n, c in zip(names, files, strict=True)]
        named = ": " + ", ".join(names)
    return _files_summary(files) + where + named
