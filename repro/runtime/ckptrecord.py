"""Recording a checkpoint as the script saves it: this process's RNG states written under the file's
stat before the save returns, then under its hash once a thread has read it, followed through renames.

When the script saves a checkpoint to a path (``torch.save``, safetensors' ``save_file``), the
runtime writes every RNG state of this process whole (write, rename) to
``$REPRO_RUNTIME_DIR/rng/<stat of the file>.rank<R>.json`` before the save call returns, so a
SIGKILL of everything afterwards loses nothing; a thread then hashes the file (off the training
loop's path) and moves the states to ``rng/<sha256 of the file>.rank<R>.json``. The next save or
load of that path, a write opening it, and the end of the process wait for that hash (a run of
several ranks hashes before the save returns, and marks the checkpoint for the other ranks).

The hash thread is started without waiting for it to run (`_thread.start_new_thread`): `threading`'s
start blocks until the new thread is scheduled, which on a busy machine held a 1 GiB save's return
by tens of milliseconds, more than the rest of the recording together.
"""

from __future__ import annotations

import _thread
import atexit
import json
import os
import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.runtime import ckptfiles, contract, resumestate, rngstates

_lock = threading.RLock()  # guards pending and the "saved" names the rename hook rewrites


@dataclass
class _Record:
    """A checkpoint being recorded: its states are on disk under the file's stat, its hash to come.

    The file is opened when the save returns and hashed through that descriptor, so a rename or
    an ``os.replace`` over its name afterwards changes nothing; a write that would truncate it
    in place (the next save to the same path, an ``open(path, "wb")``) waits for the hash first.
    """

    path: str  # absolute; follows a rename
    body: dict[str, Any]
    quick: Path
    file: Any
    digest: str | None = None
    hasher: int | None = None  # the hashing thread's ident, once it runs
    done: threading.Event = field(default_factory=threading.Event)  # hashed (or failed), and not pending


pending: dict[str, _Record] = {}  # absolute path -> the record hashing it in the background


def _after_fork() -> None:
    """A forked child (a DataLoader worker) has none of the parent's threads: nothing to wait for."""
    global _lock
    _lock = threading.RLock()
    pending.clear()


os.register_at_fork(after_in_child=_after_fork)


def record_checkpoint(path: str | os.PathLike[str], states: dict[str, Any] | None = None) -> str | None:
    """Write this process's RNG states for the checkpoint file just saved at ``path``; returns its hash."""
    record = _begin(path, states)
    return None if record is None else _finish(record)


def record_in_background(path: str | os.PathLike[str]) -> None:
    """Like `record_checkpoint`, the hash (and a traced run's copy) in a thread: the save returns at once.

    The states are durable under the file's stat before this returns; `wait` (the next save or
    load of the path, a write opening it, the end of the process) joins the thread. A run of
    several ranks hashes at once: the other ranks learn the checkpoint's hash from its mark.
    """
    record = _begin(path, None)
    if record is None:
        return
    if resumestate.world() > 1:
        _finish(record)
        return
    with _lock:
        pending[record.path] = record
    _wait_at_exit()
    _thread.start_new_thread(_finish_quietly, (record,))  # returns at once, the thread not yet run


def wait(path: str | os.PathLike[str] | None = None) -> None:
    """Let the background hash of ``path`` (of every checkpoint, when None) finish."""
    with _lock:
        if path is None:
            records = list(pending.values())
        else:
            found = pending.get(os.path.abspath(path))
            records = [found] if found is not None else []
    me = threading.get_ident()
    for record in records:
        if record.hasher != me:  # never the hashing thread waiting for itself
            record.done.wait()


_exit_wait = [False]


def _wait_at_exit() -> None:
    """The hashes still running finish before the interpreter ends (the threads are not `threading`'s,
    which it would join)."""
    if not _exit_wait[0]:
        _exit_wait[0] = True
        atexit.register(wait)


def _begin(path: str | os.PathLike[str], states: dict[str, Any] | None) -> _Record | None:
    d = resumestate.runtime_dir()
    if d is None or not os.path.isfile(path):
        return None
    states = states or rngstates.capture_states()
    body = {
        "path": ckptfiles.shown_path(path),
        "step": resumestate.state["step"],
        "rank": resumestate.rank(),
        "states": states,
    }
    # Under the file's stat first (at once), then under its hash: a kill while hashing loses nothing.
    quick = ckptfiles.state_path(d, ckptfiles.stat_key(path), resumestate.rank())
    ckptfiles.durable_write(quick, json.dumps(body))
    return _Record(path=os.path.abspath(path), body=body, quick=quick, file=ckptfiles.own_open(path))


def _finish_quietly(record: _Record) -> None:
    record.hasher = threading.get_ident()
    try:
        _finish(record)
    except Exception as e:  # the user's save itself succeeded
        sys.stderr.write(f"repro: could not record the RNG state of checkpoint {record.body['path']}: {e}\n")
    finally:
        with _lock:
            if pending.get(record.path) is record:
                del pending[record.path]
        record.done.set()


def _finish(record: _Record) -> str:
    """Hash the file, move its states under the hash, keep a traced run's copy, mark it for the ranks."""
    d = record.quick.parent.parent
    try:
        digest = ckptfiles.sha256_of(record.file)
        _keep_copy(d, record.file, digest)
    finally:
        record.file.close()
    final = ckptfiles.state_path(d, digest, int(record.body["rank"]))
    with _lock:  # a rename of the file meanwhile has updated the body's path
        ckptfiles.durable_write(final, json.dumps(record.body))
        record.quick.unlink(missing_ok=True)
        record.digest = digest
        resumestate.state.setdefault("saved", {})[record.path] = final
    if resumestate.world() > 1:  # tell the ranks that did not save which step this checkpoint belongs to
        step = record.body["step"]
        marks = d / contract.RNG_DIR / contract.MARKS_DIR
        marks.mkdir(parents=True, exist_ok=True)
        (marks / f"{step}.{digest}").touch()
        resumestate.state["marks_seen"].add(f"{step}.{digest}")
    return digest


def _keep_copy(d: Path, f: Any, digest: str) -> None:
    """Traced runs keep each checkpoint's bytes (up to a size), so a window can be replayed from it."""
    try:
        limit = int(os.environ.get(contract.KEEP_CHECKPOINTS_ENV, "-1"))
    except ValueError:
        return
    target = d / contract.COPIES_DIR / digest
    if limit < 0 or os.fstat(f.fileno()).st_size > limit or target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{digest}.{os.getpid()}.{threading.get_ident()}.tmp")
    f.seek(0)
    with open(tmp, "wb") as out:
        shutil.copyfileobj(f, out, 1 << 20)
    os.replace(tmp, target)


def on_audit(event: str, args: tuple[Any, ...]) -> None:
    """Renames move a recorded checkpoint's name; a write opening one still being hashed waits for it."""
    if event == "open":
        if pending and isinstance(args[0], (str, os.PathLike)) and _opens_for_write(args):
            wait(os.fspath(args[0]))
    elif event in ("os.rename", "os.replace"):
        _on_rename(args)


def _opens_for_write(args: tuple[Any, ...]) -> bool:
    mode, flags = args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else 0
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC))


def _on_rename(args: tuple[Any, ...]) -> None:
    """A checkpoint saved to a temporary name and renamed into place is recorded under its final name."""
    if not resumestate.state.get("saved") and not pending:
        return
    try:
        src, dst = os.path.abspath(os.fspath(args[0])), os.fspath(args[1])
    except TypeError:
        return
    with _lock:
        record = pending.pop(src, None)
        if record is not None and record.digest is None:  # still hashing: it writes the new name
            record.body["path"] = ckptfiles.shown_path(dst)
            record.path = os.path.abspath(dst)
            pending[record.path] = record
            return
        state_path = resumestate.state.get("saved", {}).pop(src, None)
    if state_path is None or not state_path.is_file():
        return
    try:
        body = json.loads(state_path.read_text(encoding="utf-8"))
        body["path"] = ckptfiles.shown_path(dst)
        ckptfiles.durable_write(state_path, json.dumps(body))
    except (OSError, ValueError):
        pass


def path_of(f: Any) -> str | None:
    """The file a save or load is about: a path, or an open file's name (``with open(p, "wb") as f``)."""
    if isinstance(f, (str, os.PathLike)):
        return os.fspath(f)
    name = getattr(f, "name", None)  # a BytesIO has none; a file opened from a descriptor has an int
    if isinstance(name, str) and hasattr(f, "fileno") and os.path.isfile(name):
        return name
    return None


def after_save(f: Any) -> None:
    path = path_of(f)
    if path is None:
        return
    if not isinstance(f, (str, os.PathLike)):
        try:
            f.flush()  # the bytes just saved, on disk before they are hashed
        except (OSError, ValueError):
            return
    try:
        if isinstance(f, (str, os.PathLike)):
            record_in_background(path)
        else:  # an open file the script may go on writing: hashed as it is now
            record_checkpoint(path)
    except Exception as e:  # the user's save itself succeeded
        sys.stderr.write(f"repro: could not record the RNG state of checkpoint {path}: {e}\n")
