"""Which files are a run's outputs: what the run itself wrote, anywhere under the project root.

The rule, in one place: every file the run's processes reported writing (or the backend saw
change in its scratch copy), plus files new or changed in the declared output dirs that no
other run claims, minus declared data, ``.repro/``, interpreter caches and the
``outputs.exclude`` globs. A file another run wrote meanwhile is not this run's. A link the
run made is an output recorded as a link; nothing is reached through one (`repro.collect.produced`).
"""

from __future__ import annotations

import fnmatch
import functools
import posixpath
import re
from collections.abc import Callable
from pathlib import Path

from repro.collect import produced
from repro.collect.reports import written_by
from repro.store.processes import is_own_output, own_output_files
from repro.store.treehash import gc_paused

Stat = tuple[int, int, int]

# Never outputs: the store, version control, bytecode the interpreter caches.
DEFAULT_EXCLUDES = (".repro", ".git", "__pycache__", "*.pyc")


def snapshot(root: Path, dirs: list[str]) -> dict[str, Stat]:
    """(size, mtime, inode) of every file and link under the declared output dirs (a link's own)."""
    seen: dict[str, Stat] = {}
    for rel in dirs:
        for found in produced.walk(root / rel):  # a declared dir is a root the host chose
            seen[f"{rel.rstrip('/')}/{found.rel}"] = found.stat
    return seen


def snapshot_tree(root: Path, skip: list[str], limit: int = 100_000) -> dict[str, Stat]:
    """(size, mtime, inode) of the project's files and links, for a command the runtime cannot watch.

    The store, version control, virtual environments and ``skip`` (declared data) are not
    walked, nor is any link; a tree larger than ``limit`` files is cut short there.
    """
    skipped = {s.strip("/") for s in skip}

    def keep_dir(rel: str, names: frozenset[str]) -> bool:
        return (
            posixpath.basename(rel) not in (".repro", ".git")
            and rel not in skipped
            and "pyvenv.cfg" not in names
        )

    with gc_paused():  # a tuple a file, none of them in a cycle
        return produced.stats(root, keep_dir, frozenset(skipped), limit)


def changed_since(root: Path, before: dict[str, Stat], skip: list[str]) -> set[str]:
    """Files new or changed in the project since ``snapshot_tree`` took ``before``; not the file repro's
    own output goes to (a log the shell writes, which grows while the run runs)."""
    after = snapshot_tree(root, skip)
    changed = {rel for rel, stat in after.items() if before.get(rel) != stat}
    own = own_output_files()
    return {rel for rel in changed if not (own and is_own_output(root / rel, own))}


def located(root: Path, rel: str, declared: list[str]) -> tuple[Path, str]:
    """Where the output ``rel`` is read from: under the declared output dir holding it (a root the
    host chose, opened as given even when it is a link), else under the project root."""
    if not declared:
        return root, rel
    holders = [d.strip("/") for d in declared if d.strip("/") and under(rel, [d])]
    if not holders:
        return root, rel
    top = max(holders, key=len)
    return root / top, rel[len(top) + 1 :] if rel != top else "."


def excluded(rel: str, patterns: list[str] | tuple[str, ...]) -> bool:
    """Whether ``rel`` or one of its parent directories matches one of the globs."""
    if not patterns:
        return False
    matcher = _globs(tuple(patterns))
    parts = rel.split("/")
    parents = ["/".join(parts[:i]) for i in range(1, len(parts))]
    return any(matcher(c) for c in (rel, *parents, *parts))


@functools.lru_cache(maxsize=32)
def _globs(patterns: tuple[str, ...]) -> Callable[[str], re.Match[str] | None]:
    """One compiled matcher for all the globs (`fnmatch.fnmatchcase` of each, in one regex)."""
    return re.compile("|".join(fnmatch.translate(p.rstrip("/")) for p in patterns)).match


def under(rel: str, dirs: list[str]) -> bool:
    return any(rel == d.rstrip("/") or rel.startswith(d.rstrip("/") + "/") for d in dirs if d)


def claimed_elsewhere(runs_dir: Path, this_run: str, since_ns: int) -> set[str]:
    """Files other runs in the store wrote while this one ran (running ones and ones sealed since)."""
    from repro.store.blobs import read_list_blob
    from repro.store.recordio import hydrate, load_record
    from repro.store.rundir import RunDir

    claimed: set[str] = set()
    if not runs_dir.is_dir():
        return claimed
    for path in runs_dir.iterdir():
        if path.name == this_run:
            continue
        run_dir = RunDir(path)
        # The reports first: a run seals its record before it deletes them, so a run that is
        # sealing between the two looks is still seen in one of them.
        if run_dir.runtime.is_dir():
            claimed.update(written_by(run_dir.runtime))
        record = run_dir.record
        try:
            if record.is_file() and record.stat().st_mtime_ns >= since_ns:
                sealed = load_record(record.read_bytes())
                hydrate(sealed, lambda d: read_list_blob(runs_dir.parent, d), only=("results.outputs",))
                claimed.update(o.path for o in sealed.results.outputs)
        except Exception:  # a record being written or unreadable claims nothing
            pass
    return claimed


def select(
    root: Path,
    *,
    written: set[str],
    declared: list[str],
    before: dict[str, Stat],
    data: list[str],
    exclude: list[str],
    claimed: set[str],
) -> list[str]:
    """The run's output files (relative POSIX paths, sorted) that exist now."""
    after = snapshot(root, declared)
    changed = {rel for rel, stat in after.items() if before.get(rel) != stat and rel not in claimed}
    patterns = [*DEFAULT_EXCLUDES, *exclude]
    found = set()
    with produced.Dirs() as dirs:
        for reported in written | changed:
            rel = produced.inside(reported)
            if rel is None or under(rel, data) or excluded(rel, patterns):
                continue
            item = produced.find(*located(root, rel, declared), dirs=dirs)
            if item is not None and item.kind in ("file", "link"):  # a link is recorded as one, never read
                found.add(rel)
    return sorted(found)
