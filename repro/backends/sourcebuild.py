"""Source distributions built into wheels in a sandbox: a container with no network and no host mounts.

The host never runs a package's build backend. For the source distributions a lock
resolves to (releases with no wheel for the image's Python):

1. each one's build requirements are read as data from its ``pyproject.toml``
   (``[build-system] requires``; PEP 517's ``setuptools>=40.8.0`` and ``wheel`` without one);
2. they are fetched as wheels only (``repro.fetch.binaries``: no code runs for a wheel);
3. a container of the base image the environment image is built from, with no network, no
   mounts, no capabilities and an unprivileged user, is given the sdists and those wheels by
   copy, runs ``pip wheel --no-index --find-links`` for each, and its ``/build/out`` is
   copied back (the engine side is ``repro.backends.docker.sandbox.run_sandbox``);
4. a wheel is taken from it only when its file name is the sdist's project and version and
   it installs on the image's Python; it is cached by the sdist's sha256 and the base id.

What is hash-checked: the sdist, against the lockfile, before it enters the sandbox; the
built wheel, whose sha256 is taken when it leaves the sandbox and checked by the image's
``pip install --require-hashes``. What is not: the build requirements are chosen by pip
from the host's indexes within the sdist's ranges, not pinned by the lock (they run only in
the sandbox and are not installed into the image); and the built wheel's contents are what
the sdist's build made of it, as trustworthy as the sdist the lock pins.
"""

from __future__ import annotations

import io
import re
import shutil
import tarfile
import tempfile
import tomllib
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from repro.errors import BuildError
from repro.facts.lockfile import Pinned, cache_dir, canonical_name
from repro.fetch.binaries import download_wheels
from repro.fetch.names import parse as parse_dist
from repro.fetch.pick import target_tags
from repro.fetch.pinned import Fetched
from repro.store.hashing import sha256_file

DEFAULT_REQUIRES = ("setuptools>=40.8.0", "wheel")  # PEP 517/518, for an sdist without [build-system]
MAX_REQUIRES = 32
MAX_PYPROJECT = 1 << 20  # bytes of pyproject.toml read
MAX_SCAN = 1 << 30  # bytes of an sdist read looking for it
MAX_WHEEL = 2 << 30  # bytes of one built wheel
MAX_OUT = 4 << 30  # bytes of everything a build leaves in /build/out
TIMEOUT_S = 1800  # a build that runs longer is stopped
SANDBOX_USER = "65534:65534"  # nobody
OUT = "/build/out"
BUILT_DIR = "built"  # under the wheelhouse: built wheels by sdist digest and base id
OnLine = Callable[[str], None]
# (the sandbox's input tar, where to write /build/out as a tar, timeout, lines) → exit status
SandboxRun = Callable[[Path, Path, int, OnLine], int]

SCRIPT = """\
set -u
export HOME=/tmp PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_PROGRESS_BAR=off
python3 -m venv /tmp/venv || exit 90
for sdist in /build/sdists/*; do
  echo "repro-sandbox: building ${sdist##*/}"
  /tmp/venv/bin/pip wheel --use-pep517 --no-deps --no-index --find-links /build/wheels \\
    --wheel-dir /build/out "$sdist" || echo "repro-sandbox: ${sdist##*/} did not build"
done
"""


@dataclass(frozen=True)
class Built:
    """A wheel built from a pinned sdist in the sandbox."""

    key: str
    wheel: Path
    sha256: str
    sdist: str  # the sdist's file name


class SourceBuildFailed(BuildError):
    """An sdist did not build into a wheel inside the sandbox."""

    def __init__(self, req: Pinned, reason: str, log: Path | None) -> None:
        self.req, self.reason, self.log = req, reason, log
        where = f"; its log: {log}" if log else ""
        super().__init__(
            f"{req.name}=={req.version} did not build from source in the sandbox (no network, no host "
            f"files): {reason}",
            hint="a build may need only what its wheels bring (no compiler or system library is there)"
            f"; lock a release that ships a wheel for the image's Python{where}",
        )


# --------------------------------------------------------------------------- build requirements


def build_requires(sdist: Path, python_version: str | None = None) -> list[str]:
    """The build requirements an sdist declares, read as data from its ``pyproject.toml``.

    Raises:
        BuildError: a pyproject.toml that is not TOML, or requirements that are malformed, name a
            URL, or are too many.
    """
    text = _top_level_file(sdist, "pyproject.toml")
    if text is None:
        return list(DEFAULT_REQUIRES)
    try:
        system = tomllib.loads(text.decode("utf-8", errors="replace")).get("build-system")
    except tomllib.TOMLDecodeError as e:
        raise _refused(sdist, f"pyproject.toml is not valid TOML ({e})") from e
    if system is None:
        return list(DEFAULT_REQUIRES)
    requires = system.get("requires") if isinstance(system, dict) else None
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise _refused(sdist, "[build-system] requires is not a list of strings")
    if len(requires) > MAX_REQUIRES:
        raise _refused(sdist, f"{len(requires)} build requirements (at most {MAX_REQUIRES})")
    env = None
    if python_version:
        env = {"python_version": python_version, "python_full_version": f"{python_version}.0"}
    wanted: list[str] = []
    for raw in requires:
        try:
            req = Requirement(raw)
        except InvalidRequirement as e:
            raise _refused(sdist, f"malformed build requirement {raw[:80]!r}") from e
        if req.url:
            raise _refused(sdist, f"build requirement {req.name} names a URL (index wheels only)")
        if req.marker is None or req.marker.evaluate(env):
            req.marker = None
            wanted.append(str(req))
    backend = system.get("build-backend")
    names = {canonical_name(Requirement(r).name) for r in wanted}
    if not isinstance(backend, str) or backend.startswith("setuptools"):
        wanted += [r for r in DEFAULT_REQUIRES if canonical_name(Requirement(r).name) not in names]
    return wanted


def _refused(sdist: Path, why: str) -> BuildError:
    return BuildError(
        f"{sdist.name}: {why}; it is not built",
        hint="lock a release of the package that ships a wheel for the image's Python",
    )


def _top_level_file(sdist: Path, name: str) -> bytes | None:
    """``<project>-<version>/<name>`` from an sdist, without extracting anything."""
    try:
        if sdist.name.endswith(".zip"):
            with zipfile.ZipFile(sdist) as z:
                for info in z.infolist():
                    if _is_top(info.filename, name) and info.file_size <= MAX_PYPROJECT:
                        return z.read(info)
            return None
        with tarfile.open(sdist, "r:gz") as t:
            for member in t:
                if member.offset_data > MAX_SCAN:
                    return None
                if _is_top(member.name, name) and member.isreg() and member.size <= MAX_PYPROJECT:
                    f = t.extractfile(member)
                    return f.read() if f else None
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError) as e:
        raise _refused(sdist, f"not a readable source distribution ({e})") from e
    return None


def _is_top(path: str, name: str) -> bool:
    parts = [p for p in path.split("/") if p and p != "."]
    return len(parts) == 2 and parts[1] == name


# --------------------------------------------------------------------------- the sandbox


def build(
    sdists: list[tuple[Pinned, Fetched]],
    base_id: str,
    python_version: str | None,
    run: SandboxRun,
    on_line: OnLine,
    cache: Path | None = None,
) -> dict[str, Built]:
    """Wheels built from ``sdists`` in the sandbox ``run`` gives (reused from the cache when built
    before on the same base image). {normal name: Built}.

    Raises:
        BuildError: a build requirement has no wheel, the sandbox failed, or an sdist did not build.
        SourceBuildFailed: an sdist did not build (one line naming it, the log beside its wheel).
    """
    root = cache or (cache_dir() / "wheelhouse" / BUILT_DIR)
    done: dict[str, Built] = {}
    todo: list[tuple[Pinned, Fetched, Path]] = []
    for req, sdist in sdists:
        folder = root / sdist.sha256 / _base_key(base_id)
        hit = _cached(folder, req, sdist, python_version)
        if hit is not None:
            on_line(f"reusing {hit.wheel.name}, built from {sdist.path.name} in the sandbox before")
            done[req.key] = hit
        else:
            todo.append((req, sdist, folder))
    if todo:
        done.update(_build_now(todo, python_version, run, on_line))
    return done


def _base_key(base_id: str) -> str:
    return re.sub(r"[^0-9a-zA-Z]", "", base_id.split(":")[-1])[:24] or "base"


def _cached(folder: Path, req: Pinned, sdist: Fetched, python_version: str | None) -> Built | None:
    if not folder.is_dir():
        return None
    wheel = _pick_wheel(list(folder.iterdir()), req, python_version)
    if wheel is None:
        return None
    return Built(req.key, wheel, sha256_file(wheel), sdist.path.name)


def _pick_wheel(files: list[Path], req: Pinned, python_version: str | None) -> Path | None:
    ranked = {tag: i for i, tag in enumerate(target_tags(python_version))}
    best: tuple[int, Path] | None = None
    for path in files:
        name = parse_dist(path.name)
        if name is None or name.kind != "wheel" or not name.is_release(req.key, req.version):
            continue
        rank = min((ranked[t] for t in name.tags if t in ranked), default=None)
        if rank is not None and (best is None or rank < best[0]):
            best = (rank, path)
    return best[1] if best else None


def _build_now(
    todo: list[tuple[Pinned, Fetched, Path]], python_version: str | None, run: SandboxRun, on_line: OnLine
) -> dict[str, Built]:
    requires = sorted({r for _, sdist, _ in todo for r in build_requires(sdist.path, python_version)})
    with tempfile.TemporaryDirectory(prefix="repro-sdist-") as tmp:
        scratch = Path(tmp)
        wheels: list[Path] = []
        if requires:
            on_line(f"fetching the build requirements as wheels: {', '.join(requires)}")
            wheels = download_wheels(requires, scratch / "wheels", python_version, on_line)
        inbox, outbox = scratch / "in.tar", scratch / "out.tar"
        _write_inbox(inbox, [sdist.path for _, sdist, _ in todo], wheels)
        lines: list[str] = []

        def keep(line: str) -> None:
            lines.append(line)
            on_line(line)

        names = ", ".join(sdist.path.name for _, sdist, _ in todo)
        on_line(f"building {names} in a sandbox (no network, no host mounts)")
        run(inbox, outbox, TIMEOUT_S, keep)
        out = scratch / "out"
        _read_outbox(outbox, out)
        built: dict[str, Built] = {}
        for req, sdist, folder in todo:
            wheel = _pick_wheel(sorted(out.iterdir()), req, python_version)
            log = _save_log(folder, lines)
            if wheel is None:
                raise SourceBuildFailed(req, _reason(lines, sdist.path.name), log)
            kept = folder / wheel.name
            shutil.copyfile(wheel, kept)
            built[req.key] = Built(req.key, kept, sha256_file(kept), sdist.path.name)
            on_line(f"built {kept.name} from {sdist.path.name}")
    return built


def _add(tar: tarfile.TarFile, name: str, data: bytes | None = None, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.mode = mode
    if data is None:
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        return
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _write_inbox(dest: Path, sdists: list[Path], wheels: list[Path]) -> None:
    """The sandbox's /build: the script, the sdists, the build-requirement wheels, an empty out/."""
    with tarfile.open(dest, "w") as tar:
        _add(tar, "build", mode=0o755)
        _add(tar, "build/build.sh", SCRIPT.encode())
        for folder, files in (("sdists", sdists), ("wheels", wheels)):
            _add(tar, f"build/{folder}", mode=0o755)
            for path in files:
                info = tar.gettarinfo(str(path), arcname=f"build/{folder}/{path.name}")
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mode = 0o644
                with open(path, "rb") as f:
                    tar.addfile(info, f)
        _add(tar, "build/out", mode=0o777)


def _read_outbox(outbox: Path, dest: Path) -> None:
    """The wheels the sandbox left in /build/out: plain files directly in it, nothing else."""
    dest.mkdir()
    if not outbox.is_file():
        return
    try:
        with tarfile.open(outbox) as tar:
            for member in tar:
                parts = member.name.split("/")
                if len(parts) != 2 or not member.isreg() or not parts[1].endswith(".whl"):
                    continue
                name = parse_dist(parts[1])
                if name is None or member.size > MAX_WHEEL:
                    continue
                src = tar.extractfile(member)
                if src is None:
                    continue
                with src, open(dest / name.filename, "wb") as out:
                    shutil.copyfileobj(src, out)
    except (tarfile.TarError, EOFError) as e:
        raise BuildError(f"the sandbox's output could not be read ({e})") from e


def _save_log(folder: Path, lines: list[str]) -> Path | None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / "build.log"
        log.write_text("\n".join(lines) + "\n")
        return log
    except OSError:
        return None


# pip's own summary lines after a failed build: the cause is in a line before them
_PIP_TRAILER = ("Failed to build", "Failed building wheel", "subprocess-exited-with-error",
                "did not run successfully", "This error originates from a subprocess", "repro-sandbox:",
                "ERROR: Failed")  # fmt: skip


def _reason(lines: list[str], sdist: str) -> str:
    """The last error-looking line of the build's output that is not pip's summary; printable, short."""
    own = [ln for ln in lines if ln.strip() and not any(t in ln for t in _PIP_TRAILER)]
    errors = [ln for ln in own if re.search(r"error|Error|ERROR|failed|No matching distribution", ln)]
    text = (errors or own or [f"no wheel came out for {sdist}"])[-1]
    clean = "".join(ch if ch.isprintable() else "?" for ch in text).strip(" │╰─>")
    return clean[:200] or f"no wheel came out for {sdist}"
