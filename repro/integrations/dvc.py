"""DVC: fetch the exact versions of a run's DVC-tracked inputs for a replay, through DVC itself.

The record keeps, for each declared input DVC tracks, DVC's own hash and the remote it was
pushed to (`repro.facts.dvc`). A replay on a host without that data (or with other bytes) calls
`fetch_inputs`: a throwaway DVC repository in the replay's scratch space gets the recorded
remote *as this host configures it* (the project's ``.dvc/config`` and ``config.local``, DVC's
global and system config), a cache of its own, and one ``.dvc`` file per recorded output written
from the record; ``fetch`` and ``checkout`` then place exactly those versions there. The host's
working data, ``.dvc`` files and cache are never written. What DVC fetched is checked against
repro's own manifest by the caller before anything runs.

The only module that imports ``dvc`` (``repro-capsule[dvc]``), and only inside its functions;
every DVC error becomes a `DataUnavailable` here.
"""

from __future__ import annotations

import logging
import posixpath
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from repro.errors import DataUnavailable, ReproError
from repro.store.record import DvcSource, Record

INSTALL_HINT = "install DVC where repro runs: pip install 'repro-capsule[dvc]'"
_REPO = ".dvc-fetch"  # the throwaway DVC repository's cache, inside the scratch root
_FETCH_HINT = (
    "check that the remote holds the pushed data (dvc push where the run was made), "
    "or point --data-root at the data"
)


@dataclass
class FetchResult:
    """What `fetch_inputs` placed under ``root``: inputs fetched from DVC, and those linked from the host."""

    root: Path
    fetched: list[str] = field(default_factory=list)  # input paths
    remotes: list[str] = field(default_factory=list)  # remote names, as this host configures them
    linked: list[str] = field(default_factory=list)  # inputs DVC does not track, linked from the host

    def describe(self) -> str:
        where = ", ".join(f"`{r}`" for r in self.remotes)
        text = f"data fetched through DVC from the remote {where}: {', '.join(self.fetched)}"
        return text + (f" (from this host: {', '.join(self.linked)})" if self.linked else "")


def tracked(record: Record) -> bool:
    """Whether DVC holds any of the record's declared inputs."""
    return any(item.dvc for item in record.data.inputs)


def fetch_inputs(record: Record, scratch_root: Path, host_root: Path) -> FetchResult:
    """Place the record's declared inputs under ``scratch_root`` (same relative paths): those DVC
    tracks fetched through DVC from their recorded remote, the others linked from ``host_root``.

    Raises:
        DataUnavailable: DVC is not installed, the remote is not configured here, or DVC could
            not fetch or check out a recorded version.
    """
    sources = _unique(s for item in record.data.inputs for s in item.dvc)
    if not sources:
        return FetchResult(scratch_root)
    api = _import_dvc()
    scratch_root.mkdir(parents=True, exist_ok=True)
    remotes = _host_remotes(api, host_root, sources)
    with _quiet() as errors:
        try:
            _fetch(api, scratch_root, sources, remotes)
        except ReproError:
            raise
        except OSError as e:
            raise DataUnavailable(f"DVC could not place the recorded data: {e}", hint=_FETCH_HINT) from e
        except Exception as e:  # noqa: BLE001 - DVC's errors and its plugins': one line, never a traceback
            raise _unavailable(e, errors, sources, remotes) from e
        finally:
            _clean(scratch_root, sources)
    result = FetchResult(scratch_root, remotes=sorted(set(remotes.names.values())))
    for item in record.data.inputs:
        if item.dvc:
            result.fetched.append(item.path)
        elif _link(host_root, scratch_root, item.path):
            result.linked.append(item.path)
    return result


def _unique(sources: Iterator[DvcSource]) -> list[DvcSource]:
    found: dict[str, DvcSource] = {}
    for source in sources:
        found.setdefault(source.out, source)
    outs = sorted(found)
    # An output inside another fetched one comes with it.
    return [found[o] for o in outs if not any(o != p and o.startswith(p.rstrip("/") + "/") for p in outs)]


@dataclass
class _Dvc:
    Repo: Any
    Config: Any
    DvcException: type[Exception]


def _import_dvc() -> _Dvc:
    try:
        from dvc.config import Config
        from dvc.exceptions import DvcException
        from dvc.repo import Repo
    except ImportError as e:
        raise DataUnavailable(
            "the recorded data lives in a DVC remote and DVC is not installed here", hint=INSTALL_HINT
        ) from e
    return _Dvc(Repo, Config, DvcException)


@dataclass
class _Remotes:
    names: dict[str | None, str]  # recorded name (None: the default) → the name this host configures
    config: dict[str, dict[str, Any]]  # those remotes' sections, as this host configures them


def _host_remotes(api: _Dvc, host_root: Path, sources: list[DvcSource]) -> _Remotes:
    """The recorded remotes as this host configures them (DVC's config levels, resolved by DVC).

    Raises:
        DataUnavailable: a recorded remote (or, for None, a default one) is not configured here.
    """
    dvc_dir = next((str(d / ".dvc") for d in (host_root, *host_root.parents) if (d / ".dvc").is_dir()), None)
    try:
        config = api.Config(dvc_dir=dvc_dir, validate=True)
        configured, default = dict(config["remote"]), config["core"].get("remote")
    except (api.DvcException, OSError) as e:
        raise DataUnavailable(
            f"this host's DVC configuration cannot be read: {e}", hint=_remote_hint(None)
        ) from e
    remotes = _Remotes({}, {})
    for name in dict.fromkeys(s.remote for s in sources):
        chosen = name or default
        if not chosen or chosen not in configured:
            what = f"the DVC remote `{name}`" if name else "a default DVC remote"
            raise DataUnavailable(
                f"the recorded data lives in {what}, which this host does not configure",
                hint=_remote_hint(name),
            )
        remotes.names[name] = chosen
        remotes.config[chosen] = dict(configured[chosen])
    return remotes


def _remote_hint(name: str | None) -> str:
    add = f"dvc remote add {name or '-d NAME'} URL"
    return f"configure it in the project: {add} (or point --data-root at the data)"


def _fetch(api: _Dvc, scratch_root: Path, sources: list[DvcSource], remotes: _Remotes) -> None:
    """A DVC repository of its own at ``scratch_root`` (this host's remotes, a cache of its own),
    one ``.dvc`` file per recorded output, fetched from its remote and checked out there."""
    with api.Repo.init(str(scratch_root), no_scm=True) as repo, repo.config.edit("repo") as conf:
        conf["core"].update(analytics=False, check_update=False, autostage=False)
        conf["cache"]["dir"] = str(scratch_root / _REPO / "cache")
        conf["cache"]["type"] = "copy"  # the data placed is independent of the cache removed after
        for name, section in remotes.config.items():
            conf["remote"][name] = section
    targets: dict[str, list[str]] = {}
    for source in sources:
        if source.out in ("", ".") or source.out.split("/")[0] in (".dvc", ".dvcignore", _REPO):
            raise DataUnavailable(f"a recorded DVC output is not a data folder or file: {source.out!r}")
        dvc_file = scratch_root / (source.out + ".dvc")
        dvc_file.parent.mkdir(parents=True, exist_ok=True)
        dvc_file.write_bytes(yaml.safe_dump(_dvc_file(source), sort_keys=False).encode())
        targets.setdefault(remotes.names[source.remote], []).append(str(dvc_file))
    with api.Repo(str(scratch_root)) as repo:
        for name, files in targets.items():
            repo.fetch(targets=files, remote=name)
        repo.checkout(targets=[f for files in targets.values() for f in files])


def _clean(scratch_root: Path, sources: list[DvcSource]) -> None:
    """Remove the throwaway repository, its cache and ``.dvc`` files: only the data stays."""
    for name in (".dvc", ".dvcignore", _REPO):
        path = scratch_root / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    for source in sources:
        (scratch_root / (source.out + ".dvc")).unlink(missing_ok=True)


def _link(host_root: Path, scratch_root: Path, rel: str) -> bool:
    source, target = host_root / rel, scratch_root / rel
    if not source.exists() or target.exists() or target.is_symlink():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(source.resolve(), target_is_directory=source.is_dir())
    return True


def _dvc_file(source: DvcSource) -> dict[str, Any]:
    """The ``.dvc`` file that names exactly the recorded version of ``source``."""
    out: dict[str, Any] = {"etag" if source.hash_name == "etag" else "md5": source.hash_value}
    if source.size is not None:
        out["size"] = source.size
    if source.nfiles is not None:
        out["nfiles"] = source.nfiles
    if source.hash_name == "md5":
        out["hash"] = "md5"
    out["path"] = posixpath.basename(source.out)
    return {"outs": [out]}


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_LOGGERS = ("dvc", "dvc_data", "dvc_objects")


@contextmanager
def _quiet() -> Iterator[list[str]]:
    """DVC's log lines kept (its errors go into repro's message), not printed."""
    kept: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.ERROR:
                kept.append(record.getMessage())

    handler = _Keep()
    saved = []
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level, logger.propagate))
        logger.addHandler(handler)
        logger.propagate = False
        logger.setLevel(logging.ERROR)
    try:
        yield kept
    finally:
        for logger, level, propagate in saved:
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.propagate = propagate


def _unavailable(
    e: Exception, errors: list[str], sources: list[DvcSource], remotes: _Remotes
) -> DataUnavailable:
    names = ", ".join(f"`{r}`" for r in sorted(set(remotes.names.values())))
    if type(e).__name__ == "CheckoutError":  # what was fetched lacks a recorded object
        missing = ", ".join(f"{s.out} ({s.hash_name} {s.hash_value})" for s in sources)
        return DataUnavailable(
            f"the DVC remote {names} does not hold the recorded version of {missing}", hint=_FETCH_HINT
        )
    lines = (_ANSI.sub("", " ".join(m.split())) for m in [str(e), *errors])
    detail = "; ".join(dict.fromkeys(m for m in lines if m))[:400] or type(e).__name__
    return DataUnavailable(
        f"DVC could not fetch the recorded data from the remote {names}: {detail}", hint=_FETCH_HINT
    )
