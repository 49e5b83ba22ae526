"""Exact resume, inside the training process: RNG states recorded at every checkpoint, restored at load.

Standard library only; torch and NumPy are reached through the modules the script imported.

When the script saves a checkpoint to a path (``torch.save``, safetensors' ``save_file``), the
runtime writes every RNG state of this process — ``random``, NumPy's global state and every
``default_rng`` generator, torch's CPU generator, every CUDA device's — whole (write, rename) to
``$REPRO_RUNTIME_DIR/rng/<stat of the file>.rank<R>.json`` before the save call returns, so a
SIGKILL of everything afterwards loses nothing; a thread then hashes the file (off the training
loop's path) and moves the states to ``rng/<sha256 of the file>.rank<R>.json``. The next save or
load of that path, a write opening it, and the end of the process wait for that hash (a run of
several ranks hashes before the save returns). In a multi-process run the ranks that do not save
(rank 0 usually saves alone) keep their states of the last few optimizer
steps in memory and write the one of the step the checkpoint was taken at as soon as they see
the saver's mark (``rng/marks/<step>.<sha256>``), at most a step later; their states of the
last few steps are also kept in ``rng/ring/``, where the host finds one a kill left unwritten.

In a resumed run (``REPRO_RESUMED_FROM`` set; the states of the chain are put in ``rng/``),
the first load of a file whose hash has a recorded state restores those states right after
the load, so DataLoader iterators created afterwards (sampler order, worker base seeds and
with them NumPy/``random`` in the workers) and dropout continue the same streams. A
checkpoint loaded without a recorded state is reported: that resume will not be exact.

Events (``restored``, ``missing``) go to ``resume-events.jsonl``. For `repro check --interrupt`:
with ``REPRO_RESUME_TRACE=1`` every optimizer step first appends what decides it (parameter,
gradient and optimizer-state sums, learning rates, a fingerprint of each RNG stream) to
``rtrace.rank<R>.jsonl``; ``REPRO_INTERRUPT_AT_STEP=N`` SIGKILLs rank 0's process group
(its DataLoader workers included) right after optimizer step N. For `repro replay --from`:
``REPRO_STOP_AFTER_STEPS=K`` ends each process K optimizer steps after its restore.
"""

from __future__ import annotations

import atexit
import base64
import functools
import hashlib
import json
import os
import random
import shutil
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from repro.runtime import contract, jsonl, passthrough, steptrace

EVENTS = contract.STREAMS["resume_events"].file
_events = jsonl.Appender("resume_events", dumps=lambda row: json.dumps(row, sort_keys=True))
_rtrace = jsonl.Appender("rtrace", dumps=lambda row: json.dumps(row, default=str))
RING = 8  # optimizer steps of state a non-saving rank keeps in memory
MAX_GENERATORS = 1000  # default_rng generators tracked per process

_local = threading.local()
_lock = threading.RLock()  # guards _pending and the "saved" names the rename hook rewrites


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
    thread: threading.Thread | None = None
    digest: str | None = None


_pending: dict[str, _Record] = {}  # absolute path -> the record hashing it in the background


def _after_fork() -> None:
    """A forked child (a DataLoader worker) has none of the parent's threads: nothing to wait for."""
    global _lock
    _lock = threading.RLock()
    _pending.clear()


os.register_at_fork(after_in_child=_after_fork)

_state: dict[str, Any] = {
    "step": 0,
    "restored": False,
    "generators": [],
    "ring": OrderedDict(),
    "marks_seen": set(),
}


# --------------------------------------------------------------------------- environment


def _rank() -> int:
    return max(jsonl.rank(), 0)  # the states and rows of a process outside torchrun are rank 0's


def _world() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def _runtime_dir() -> Path | None:
    d = os.environ.get(contract.RUNTIME_DIR_ENV)
    return Path(d) if d and os.environ.get(contract.RUN_ID_ENV) else None


def _resuming() -> bool:
    return bool(os.environ.get(contract.RESUMED_FROM_ENV))


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The checkpoint's hash; this read is the runtime's own, not an input of the run."""
    with _own_open(path) as f:
        return _sha256_of(f)


def _sha256_of(f: Any) -> str:
    """Hash an open file from its start (hashlib lets other threads run while it digests)."""
    h = hashlib.sha256()
    buffer = bytearray(1 << 20)
    view = memoryview(buffer)
    f.seek(0)
    while n := f.readinto(buffer):
        h.update(view[:n])
    return h.hexdigest()


def _own_open(path: str | os.PathLike[str]) -> Any:
    """Open a checkpoint for the runtime's own read (the audit hook leaves this open out)."""
    _local.hashing = True
    try:
        return open(path, "rb")
    finally:
        _local.hashing = False


def hashing() -> bool:
    """Whether this thread of the runtime is opening a checkpoint (the audit hook leaves that read out)."""
    return bool(getattr(_local, "hashing", False))


def _durable_write(path: Path, text: str) -> None:
    """Whole or not at all (rename). No fsync: a SIGKILL keeps what was written, and a node that loses
    its page cache loses the checkpoint it just wrote as well."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def stat_key(path: str | os.PathLike[str]) -> str:
    """A name for a file's content known without reading it: size and mtime (a rename keeps both)."""
    st = os.stat(path)
    return f"stat-{st.st_size}-{st.st_mtime_ns}"


def _event(kind: str, **fields: Any) -> None:
    if _runtime_dir() is not None:
        _events.write({contract.ROW_KIND: kind, "rank": _rank(), **fields})


# --------------------------------------------------------------------------- the states


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def capture_states() -> dict[str, Any]:
    """Every RNG state of this process, as JSON-ready data."""
    version, internal, gauss = random.getstate()
    states: dict[str, Any] = {"python": [version, list(internal), gauss]}
    np = sys.modules.get("numpy")
    if np is not None and hasattr(np, "random"):
        name, keys, pos, has_gauss, cached = np.random.get_state()
        states["numpy"] = [name, [int(k) for k in keys], int(pos), int(has_gauss), float(cached)]
        states["numpy_generators"] = [g.bit_generator.state for g in _state["generators"]]
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_rng_state"):
        states["torch"] = _b64(bytes(torch.get_rng_state().tolist()))
        cuda = _cuda_states(torch)
        if cuda is not None:
            states["cuda"] = cuda
    return states


def _cuda_states(torch: Any) -> list[str] | None:
    """Every CUDA device's generator state, once CUDA is initialised (None before: nothing drew yet)."""
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_available() or not cuda.is_initialized():
        return None
    return [_b64(bytes(s.tolist())) for s in cuda.get_rng_state_all()]


def restore_states(states: dict[str, Any]) -> list[str]:
    """Put recorded states back; returns the streams restored (in order)."""
    done: list[str] = []
    if "python" in states:
        version, internal, gauss = states["python"]
        random.setstate((version, tuple(internal), gauss))
        done.append("python")
    np = sys.modules.get("numpy")
    if np is not None and "numpy" in states:
        name, keys, pos, has_gauss, cached = states["numpy"]
        np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
        done.append("numpy")
        recorded = states.get("numpy_generators", [])
        for generator, state in zip(_state["generators"], recorded, strict=False):
            generator.bit_generator.state = state
        _state["pending_generators"] = recorded  # generators the script creates after the load
        if recorded:
            done.append("numpy_generators")
    torch = sys.modules.get("torch")
    if torch is not None and "torch" in states:
        torch.set_rng_state(_byte_tensor(torch, states["torch"]))
        done.append("torch")
        if states.get("cuda") is not None:
            restore_cuda(torch, states["cuda"])
            done.append("cuda")
    return done


def _byte_tensor(torch: Any, text: str) -> Any:
    return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8)


def restore_cuda(torch: Any, recorded: list[str]) -> None:
    """Restore each CUDA device's state; a device count that differs is reported, the common ones set."""
    cuda = torch.cuda
    if not cuda.is_available():
        _event("missing", stream="cuda", reason="no CUDA device in the resumed process")
        return
    count = cuda.device_count()
    if count != len(recorded):
        _event("missing", stream="cuda", reason=f"{len(recorded)} CUDA device(s) recorded, {count} here")
    for index, text in enumerate(recorded[:count]):
        cuda.set_rng_state(_byte_tensor(torch, text), index)


# --------------------------------------------------------------------------- saving


def _state_path(d: Path, digest: str, rank: int) -> Path:
    return d / contract.RNG_DIR / f"{digest}.rank{rank}.json"


def _shown_path(path: str | os.PathLike[str]) -> str:
    full = os.path.abspath(path)
    root = os.environ.get(contract.PROJECT_ROOT_ENV)
    if root and full.startswith(os.path.abspath(root) + os.sep):
        return os.path.relpath(full, os.path.abspath(root))
    return os.fspath(path)


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
    if _world() > 1:
        _finish(record)
        return
    with _lock:
        _pending[record.path] = record
    record.thread = threading.Thread(target=_finish_quietly, args=(record,), name="repro-checkpoint-hash")
    record.thread.start()


def wait(path: str | os.PathLike[str] | None = None) -> None:
    """Let the background hash of ``path`` (of every checkpoint, when None) finish."""
    with _lock:
        if path is None:
            records = list(_pending.values())
        else:
            found = _pending.get(os.path.abspath(path))
            records = [found] if found is not None else []
    for record in records:
        if record.thread is not None and record.thread is not threading.current_thread():
            record.thread.join()


def _begin(path: str | os.PathLike[str], states: dict[str, Any] | None) -> _Record | None:
    d = _runtime_dir()
    if d is None or not os.path.isfile(path):
        return None
    states = states or capture_states()
    body = {"path": _shown_path(path), "step": _state["step"], "rank": _rank(), "states": states}
    # Under the file's stat first (at once), then under its hash: a kill while hashing loses nothing.
    quick = _state_path(d, stat_key(path), _rank())
    _durable_write(quick, json.dumps(body))
    return _Record(path=os.path.abspath(path), body=body, quick=quick, file=_own_open(path))


def _finish_quietly(record: _Record) -> None:
    try:
        _finish(record)
    except Exception as e:  # the user's save itself succeeded
        sys.stderr.write(f"repro: could not record the RNG state of checkpoint {record.body['path']}: {e}\n")
    finally:
        with _lock:
            if _pending.get(record.path) is record:
                del _pending[record.path]


def _finish(record: _Record) -> str:
    """Hash the file, move its states under the hash, keep a traced run's copy, mark it for the ranks."""
    d = record.quick.parent.parent
    try:
        digest = _sha256_of(record.file)
        _keep_copy(d, record.file, digest)
    finally:
        record.file.close()
    final = _state_path(d, digest, int(record.body["rank"]))
    with _lock:  # a rename of the file meanwhile has updated the body's path
        _durable_write(final, json.dumps(record.body))
        record.quick.unlink(missing_ok=True)
        record.digest = digest
        _state.setdefault("saved", {})[record.path] = final
    if _world() > 1:  # tell the ranks that did not save which step this checkpoint belongs to
        step = record.body["step"]
        marks = d / contract.RNG_DIR / contract.MARKS_DIR
        marks.mkdir(parents=True, exist_ok=True)
        (marks / f"{step}.{digest}").touch()
        _state["marks_seen"].add(f"{step}.{digest}")
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


def _on_audit(event: str, args: tuple[Any, ...]) -> None:
    """Renames move a recorded checkpoint's name; a write opening one still being hashed waits for it."""
    if event == "open":
        if _pending and isinstance(args[0], (str, os.PathLike)) and _opens_for_write(args):
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
    if not _state.get("saved") and not _pending:
        return
    try:
        src, dst = os.path.abspath(os.fspath(args[0])), os.fspath(args[1])
    except TypeError:
        return
    with _lock:
        record = _pending.pop(src, None)
        if record is not None and record.digest is None:  # still hashing: it writes the new name
            record.body["path"] = _shown_path(dst)
            record.path = os.path.abspath(dst)
            _pending[record.path] = record
            return
        state_path = _state.get("saved", {}).pop(src, None)
    if state_path is None or not state_path.is_file():
        return
    try:
        body = json.loads(state_path.read_text(encoding="utf-8"))
        body["path"] = _shown_path(dst)
        _durable_write(state_path, json.dumps(body))
    except (OSError, ValueError):
        pass


def _path_of(f: Any) -> str | None:
    """The file a save or load is about: a path, or an open file's name (``with open(p, "wb") as f``)."""
    if isinstance(f, (str, os.PathLike)):
        return os.fspath(f)
    name = getattr(f, "name", None)  # a BytesIO has none; a file opened from a descriptor has an int
    if isinstance(name, str) and hasattr(f, "fileno") and os.path.isfile(name):
        return name
    return None


def _after_save(f: Any) -> None:
    path = _path_of(f)
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


# --------------------------------------------------------------------------- loading


def _before_load(f: Any) -> str | None:
    """The hash of a checkpoint about to be loaded, when this resumed process still has to restore."""
    path = _path_of(f)
    d = _runtime_dir()
    if path is None or _state["restored"] or not _resuming() or d is None:
        return None
    wait(path)
    try:
        if not os.path.isfile(path):
            return None
        quick = stat_key(path)
        return quick if _state_path(d, quick, _rank()).is_file() else file_sha256(path)
    except OSError:
        return None


def _after_load(f: Any, digest: str | None) -> None:
    d = _runtime_dir()
    if digest is None or d is None:
        return
    path = _state_path(d, digest, _rank())
    shown = _shown_path(_path_of(f) or "?")
    if not path.is_file():
        _event("missing", path=shown, hash=digest)
        sys.stderr.write(
            f"repro: warning: checkpoint {shown} has no recorded RNG state for rank {_rank()}; "
            "this resume will not be exact (was it saved outside this run's chain?)\n"
        )
        return
    body = json.loads(path.read_text(encoding="utf-8"))
    streams = restore_states(body["states"])
    _state["restored"] = True
    _state["step"] = int(body.get("step", 0))
    _state["ring"].clear()
    _event("restored", path=shown, hash=digest, step=_state["step"], streams=streams)


# --------------------------------------------------------------------------- optimizer steps


def _after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    _state["step"] += 1
    d = _runtime_dir()
    if d is None:
        return
    if _world() > 1:
        ring = _state["ring"]
        states = ring[_state["step"]] = capture_states()
        while len(ring) > RING:
            ring.popitem(last=False)
        # Also on disk: a kill between another rank's save and this rank's next look at the marks
        # would lose this rank's state of the checkpointed step; the host finds it here instead.
        body = {"step": _state["step"], "rank": _rank(), "states": states}
        slot = d / contract.RNG_DIR / contract.RING_DIR / f"rank{_rank()}.{_state['step'] % RING}.json"
        _durable_write(slot, json.dumps(body))
        _write_marked(d)
    window = os.environ.get(contract.STOP_AFTER_STEPS_ENV)
    if window and window.isdigit() and _state["restored"]:
        _state["window"] = _state.get("window", 0) + 1
        if _state["window"] >= int(window):  # `repro replay --from`: the window is done
            wait()
            steptrace.flush()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
    stop = os.environ.get(contract.INTERRUPT_AT_STEP_ENV)
    if stop and stop.isdigit() and _state["step"] == int(stop) and not _resuming() and _rank() == 0:
        _event("interrupting", step=_state["step"])
        wait()  # the checkpoint's hash of this step is on disk (the kill is the harness's, not a race)
        steptrace.flush()
        os.killpg(os.getpgrp(), 9)  # what a preempted node does to the whole job: SIGKILL, no clean-up


def _before_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    d = _runtime_dir()
    if d is not None and os.environ.get(contract.RESUME_TRACE_ENV) == "1":
        _trace_row(d, optimizer)


def _after_barrier() -> None:
    """Ranks usually wait at a barrier while rank 0 saves: the earliest moment to see its mark."""
    d = _runtime_dir()
    if d is not None:
        _write_marked(d)


def _write_marked(d: Path) -> None:
    """A rank that did not save writes its state of the step another rank checkpointed at."""
    marks = d / contract.RNG_DIR / contract.MARKS_DIR
    try:
        names = os.listdir(marks)
    except OSError:
        return
    for name in names:
        if name in _state["marks_seen"] or name.startswith("."):
            continue
        step_text, _, digest = name.partition(".")
        step = int(step_text) if step_text.isdigit() else -1
        if step > _state["step"]:
            continue  # this rank has not got there yet
        _state["marks_seen"].add(name)
        states = capture_states() if step == _state["step"] else _state["ring"].get(step)
        target = _state_path(d, digest, _rank())
        if states is None or target.exists():
            continue
        body = {"path": "", "step": step, "rank": _rank(), "states": states}
        _durable_write(target, json.dumps(body))


def _fingerprint(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _trace_row(d: Path, optimizer: Any) -> None:
    """What decides the step about to be taken: parameters, gradients, optimizer state, LR, RNG streams."""
    torch = sys.modules["torch"]
    sums = {"params": 0.0, "grads": 0.0, "optimizer": 0.0}
    with torch.no_grad():
        for group in optimizer.param_groups:
            for p in group["params"]:
                sums["params"] += float(p.detach().double().sum().item())
                if p.grad is not None:
                    sums["grads"] += float(p.grad.detach().double().sum().item())
        for per_param in optimizer.state.values():
            for value in per_param.values():
                if isinstance(value, torch.Tensor):
                    sums["optimizer"] += float(value.detach().double().sum().item())
    row = {
        "step": _state["step"],
        **sums,
        "lr": [group.get("lr") for group in optimizer.param_groups],
        "rng": {name: _fingerprint(value) for name, value in sorted(capture_states().items())},
    }
    _rtrace.write(row)


# --------------------------------------------------------------------------- installation


def _wrap_checkpoint_io(
    module: ModuleType, save_name: str, load_name: str, path_name: str, load_path_name: str = ""
) -> None:
    """Wrap MODULE's save (path second, as ``torch.save(obj, f)``) and load (path first) functions.

    PATH_NAME is the path parameter's keyword name (LOAD_PATH_NAME the load's, when it differs);
    a save records the RNG states linked to the file, a load in a resumed process restores
    them right after it.
    """
    save, load = getattr(module, save_name), getattr(module, load_name)

    def path(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str) -> Any:
        return args[index] if len(args) > index else kwargs.get(name)

    # Through passthrough.call: a warning the function raises for its caller names the script's line.
    def wrapped_save(*args: Any, **kwargs: Any) -> Any:
        f = path(args, kwargs, 1, path_name)
        if _pending and isinstance(f, (str, os.PathLike)):
            wait(f)  # the file is about to be overwritten: its hash first
        result = passthrough.call(save, *args, **kwargs)
        _after_save(f)
        return result

    def wrapped_load(*args: Any, **kwargs: Any) -> Any:
        f = path(args, kwargs, 0, load_path_name or path_name)
        digest = _before_load(f)
        result = passthrough.call(load, *args, **kwargs)
        _after_load(f, digest)
        return result

    setattr(module, save_name, functools.update_wrapper(wrapped_save, save))
    setattr(module, load_name, functools.update_wrapper(wrapped_load, load))


def install_torch(torch: ModuleType) -> None:
    """Wrap ``torch.save``/``torch.load`` and count optimizer steps."""
    if _runtime_dir() is None:
        return
    _wrap_checkpoint_io(torch, "save", "load", "f")
    optimizer = sys.modules.get("torch.optim.optimizer")
    if optimizer is None:
        import importlib

        optimizer = importlib.import_module("torch.optim.optimizer")
    sys.addaudithook(_on_audit)
    atexit.register(wait)
    if os.environ.get(contract.RESUME_TRACE_ENV) == "1":
        optimizer.register_optimizer_step_pre_hook(_before_step)
    optimizer.register_optimizer_step_post_hook(_after_step)
    dist = getattr(torch, "distributed", None)
    if _world() > 1 and dist is not None and hasattr(dist, "barrier"):
        barrier = dist.barrier

        def wrapped_barrier(*args: Any, **kwargs: Any) -> Any:
            result = barrier(*args, **kwargs)
            _after_barrier()
            return result

        functools.update_wrapper(wrapped_barrier, barrier)
        setattr(dist, "barrier", wrapped_barrier)  # noqa: B010


def install_numpy(np: ModuleType) -> None:
    """Track every ``default_rng`` generator, so its state is recorded and restored by creation order."""
    if _runtime_dir() is None:
        return
    original = np.random.default_rng

    def default_rng(*args: Any, **kwargs: Any) -> Any:
        generator = original(*args, **kwargs)
        index = len(_state["generators"])
        if index < MAX_GENERATORS:
            _state["generators"].append(generator)
            pending = _state.get("pending_generators") or []
            if index < len(pending):
                generator.bit_generator.state = pending[index]
        return generator

    np.random.default_rng = default_rng


def install_safetensors(module: ModuleType) -> None:
    """Record states at ``safetensors.torch.save_file`` and restore at ``load_file``."""
    if _runtime_dir() is None:
        return
    _wrap_checkpoint_io(module, "save_file", "load_file", "filename")


def install_lightning(module: ModuleType) -> None:
    """Lightning saves through a byte buffer then fsspec (``cloud_io._atomic_save``), and loads
    through ``cloud_io._load``: wrap both, by path. Runs before Lightning's own modules import
    them by name."""
    if _runtime_dir() is None or not hasattr(module, "_atomic_save") or not hasattr(module, "_load"):
        return
    _wrap_checkpoint_io(module, "_atomic_save", "_load", "filepath", "path_or_url")


def set_step(step: int) -> None:
    """Continue counting optimizer steps from a checkpoint's count (`repro.checkpoint.load`)."""
    _state["step"] = step
    _state["restored"] = True


def current_step() -> int:
    """Optimizer steps taken so far (continued from the checkpoint in a resumed process)."""
    return int(_state["step"])


HOOKS = {
    "torch": install_torch,
    "numpy": install_numpy,
    "safetensors.torch": install_safetensors,
    "lightning.fabric.utilities.cloud_io": install_lightning,
    "lightning_fabric.utilities.cloud_io": install_lightning,
}
