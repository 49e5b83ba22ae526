"""Which DVC outputs hold a declared input: DVC's own hash (md5, ``.dir`` for a directory, or an
etag) and the remote it lives in, read from the ``*.dvc`` files and ``dvc.lock`` files of the
project. DVC itself is not imported here (capture stays cheap and works without it); what the
files say is checked by `repro.store.limits.dvc_source_problem`, and an output that fails it is
left out (its input is then simply not fetchable). The fetching is `repro.integrations.dvc`'s.
"""

from __future__ import annotations

import configparser
import os
import posixpath
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from repro.store.limits import dvc_source_problem, is_safe_relpath
from repro.store.record import DvcSource

LOCK_NAME = "dvc.lock"
SUFFIX = ".dvc"
MAX_FILE_BYTES = 8 << 20  # a .dvc file or dvc.lock larger than this is not read
_MAX_OUTS = 10_000  # outputs read from one file


def dvc_sources(root: Path, rel: str) -> list[DvcSource]:
    """The DVC outputs that hold the input ``rel`` (relative to ``root``): the output that is the
    input or a folder above it, else the outputs inside it. Empty when DVC tracks none of it."""
    outer = [s for s in _candidates(root, _ancestors(rel)) if _covers(s.out, rel)]
    if outer:
        return sorted(outer, key=lambda s: len(s.out))[-1:]  # the nearest one
    inner = list(_candidates(root, _dirs_within(root, rel)))
    return sorted((s for s in inner if _covers(rel, s.out) and s.out != rel), key=lambda s: s.out)


def _ancestors(rel: str) -> list[str]:
    """``a/b/c`` → ``["", "a", "a/b"]``: the folders an output holding ``rel`` could be declared in."""
    parts = [] if rel in ("", ".") else rel.split("/")
    return ["/".join(parts[:i]) for i in range(len(parts))]


def _dirs_within(root: Path, rel: str) -> Iterator[str]:
    top = root / rel
    if not top.is_dir() or top.is_symlink():
        return
    for here, dirs, _ in os.walk(top):
        dirs[:] = [d for d in dirs if d not in (".dvc", ".git")]
        yield Path(here).relative_to(root).as_posix()


def _covers(out: str, rel: str) -> bool:
    return out in ("", ".") or rel == out or rel.startswith(out.rstrip("/") + "/")


def _candidates(root: Path, folders: Iterator[str] | list[str]) -> Iterator[DvcSource]:
    """Every well-formed output named by the ``.dvc`` files and ``dvc.lock`` in ``folders``."""
    for folder in folders:
        base = root / folder
        try:
            names = sorted(n for n in os.listdir(base) if n.endswith(SUFFIX) or n == LOCK_NAME)
        except OSError:
            continue
        for name in names:
            file = posixpath.join(folder, name) if folder and folder != "." else name
            yield from _outs(root, file)


def _outs(root: Path, file: str) -> Iterator[DvcSource]:
    data = _load(root / file)
    if not isinstance(data, dict):
        return
    if file.endswith(SUFFIX):
        entries = data.get("outs")
    else:
        stages = data.get("stages")
        entries = [
            out
            for stage in (stages.values() if isinstance(stages, dict) else ())
            if isinstance(stage, dict) and isinstance(stage.get("outs"), list)
            for out in stage["outs"]
        ]
    if not isinstance(entries, list):
        return
    folder = posixpath.dirname(file)
    for entry in entries[:_MAX_OUTS]:
        source = _source(root, file, folder, entry)
        if source is not None:
            yield source


def _source(root: Path, file: str, folder: str, entry: Any) -> DvcSource | None:
    """One output entry as a DvcSource, or None when it is malformed, outside the project, or not cached."""
    if not isinstance(entry, dict) or entry.get("cache", True) is not True:
        return None
    path = entry.get("path")
    if not isinstance(path, str) or not path or path.startswith("/") or "\\" in path or "\0" in path:
        return None
    out = posixpath.normpath(posixpath.join(folder, path)) if folder else posixpath.normpath(path)
    if not is_safe_relpath(out, allow_dot=True):
        return None
    if "md5" in entry:
        hash_name, value = ("md5" if entry.get("hash") == "md5" else "md5-dos2unix"), entry["md5"]
    elif "etag" in entry:
        hash_name, value = "etag", entry["etag"]
    else:
        return None
    remote = entry["remote"] if "remote" in entry else default_remote(root, folder)
    size, nfiles = entry.get("size"), entry.get("nfiles")
    if dvc_source_problem(hash_name, value, remote, size, nfiles):
        return None
    return DvcSource(file, out, hash_name, value, remote, size, nfiles)


def _load(path: Path) -> Any:
    try:
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return None
        return yaml.safe_load(path.read_bytes())
    except (OSError, yaml.YAMLError, RecursionError, ValueError):
        return None


def default_remote(root: Path, folder: str) -> str | None:
    """The default remote (``core.remote``) of the DVC repository holding ``root/folder``: its
    ``.dvc/config.local`` over ``.dvc/config``; None when there is none."""
    here = (root / folder).absolute()
    for top in (here, *here.parents):
        config = top / ".dvc"
        if config.is_dir():
            found = None
            for name in ("config", "config.local"):
                found = _core_remote(config / name) or found
            return found
    return None


def _core_remote(path: Path) -> str | None:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return None
        parser.read_string(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, configparser.Error):
        return None
    value = parser.get("core", "remote", fallback=None)
    return value.strip().strip("'\"") if value else None
