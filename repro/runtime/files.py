"""Which files a process reads and writes, seen by an audit hook (and a few C-level writers).

Standard library only. ``open`` (builtins, ``os.open``, ``io``), ``os.rename``/``os.replace``,
``os.symlink``/``os.link`` and ``shutil`` copies raise audit events; ``torch.save``,
``torch.jit.save`` and safetensors write from C, so the runtime wraps them when they are
imported (``note_written``).
Paths under the project root are reported relative to it; writes elsewhere are reported
absolute (the runner lists them as a warning), except system and scratch places. Reads of the
declared data are not reported at all (the data's manifest already names them): a DataLoader
reading thousands of samples pays one prefix test per open.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from repro.runtime import ckptfiles, contract, procreport

_WRITE_MODE = frozenset("wax+")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_READ_MODES = frozenset(("r", "rb", "rt", "br", "tr"))
_state: dict[str, str] = {}
_data: dict[str, tuple[str, ...]] = {"files": (), "dirs": ()}  # the declared data, absolute
# The fast path: a read of declared data named as the script names it, tested on the raw string before
# any work (no normalisation, no allocation): the data's directories as prefixes, absolute and relative to
# the working directory the run started in (dropped when the script changes directory), and its files.
_fast_dirs: tuple[str, ...] = ()
_fast_files: frozenset[str] = frozenset()


def install(root: str) -> None:
    """Report reads and writes of this process (and of its forked children)."""
    _state["root"] = os.path.abspath(root)
    runtime_dir = os.environ.get(contract.RUNTIME_DIR_ENV, "")
    ignored = [runtime_dir, "/dev", "/proc", "/sys", tempfile.gettempdir()]
    _state["ignored"] = "\0".join(os.path.abspath(p) for p in ignored if p)
    declared = [p for p in os.environ.get(contract.DATA_ENV, "").split(os.pathsep) if p]
    files = tuple(os.path.normpath(os.path.join(_state["root"], p)) for p in declared)
    _data.update(files=files, dirs=tuple(f + os.sep for f in files))
    cwd = os.getcwd() + os.sep
    relative = [f[len(cwd) :] for f in files if f.startswith(cwd)]
    _fast(tuple(f + os.sep for f in (*files, *relative)), frozenset((*files, *relative)))
    import sys

    sys.addaudithook(_audit)


def _as_str(path: Any) -> str | None:
    if isinstance(path, int):
        return None
    try:
        path = os.fspath(path)
    except TypeError:
        return None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return path if isinstance(path, str) and path else None


def _is_write(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str):
        return not _WRITE_MODE.isdisjoint(mode)
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open":
        path = args[0]
        if (
            path.__class__ is str
            and args[1] in _READ_MODES
            and (path.startswith(_fast_dirs) or path in _fast_files)
            and "/." not in path
        ):
            return  # declared data, read: its manifest names it already
    elif event == "os.chdir":  # relative names mean other files from now on
        _fast(_data["dirs"], frozenset(_data["files"]))
    _audit_slow(event, args)


def _fast(dirs: tuple[str, ...], files: frozenset[str]) -> None:
    global _fast_dirs, _fast_files
    _fast_dirs, _fast_files = dirs, files


def _audit_slow(event: str, args: tuple[Any, ...]) -> None:
    if ckptfiles.hashing():  # the runtime hashing a checkpoint it saw saved or loaded
        return
    if event == "open":
        path = _as_str(args[0])
        if path is not None:
            written = _is_write(args[1], args[2] if len(args) > 2 else None)
            if not written and _declared_data(path):
                return
            note(path, written=written)
    elif event in ("os.rename", "os.replace", "os.symlink", "os.link"):
        path = _as_str(args[1])  # the new name (a link is an output, recorded as a link)
        if path is not None:
            note(path, written=True)


def _declared_data(path: str) -> bool:
    """Whether ``path`` is declared input data (an absolute path tested as it is, before any work)."""
    if not os.path.isabs(path) or ".." in path:
        path = os.path.abspath(path)
    return path.startswith(_data["dirs"]) or path in _data["files"]


def note_written(path: Any) -> None:
    """Report a file written by code the audit hook does not see (C writers)."""
    text = _as_str(path)
    if text is not None and "root" in _state:
        note(text, written=True)


def note(path: str, written: bool) -> None:
    full = os.path.abspath(path)
    root = _state["root"]
    if full.startswith(root + os.sep):
        rel = full[len(root) + 1 :]
        if rel.startswith(".repro" + os.sep):
            return
        procreport.emit("w" if written else "r", rel, p=rel)
        return
    if not written:
        return
    for ignored in _state["ignored"].split("\0"):
        if full == ignored or full.startswith(ignored + os.sep):
            return
    procreport.emit("w", full, p=full)
