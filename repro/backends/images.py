"""Environment images without an engine: Dockerfile rendering, content tags, wheelhouse, context.

An image is named by what goes into it: the rendered Dockerfile, the lockfile's bytes
and the base image's immutable id. Unchanged inputs give the same tag, so an image
that already carries the tag is reused without building. Builds are offline: the
lockfile's files are fetched on the host into a shared wheelhouse by name, version and
sha256 (``repro.fetch``: nothing of a package runs on the host), source distributions are
built into wheels in a sandbox container (``repro.backends.sourcebuild``), and every wheel is copied
into the build context and installed with ``--no-index --require-hashes``.

The run's inputs to its image (`ImageInputs`) live here, beside what turns them into one: the
runner makes them without the docker SDK and hands them to the backends that build an image
(the docker backend, Slurm's ``--node-env docker``).

This module imports no docker; ``repro.backends.docker.build`` talks to the engine.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

import xxhash
from packaging.tags import Tag

from repro import __version__
from repro.backends.base import BuiltImage, OpenImage
from repro.errors import BuildError, NotFoundError
from repro.facts.cudawheels import cuda_build
from repro.facts.lockfile import Pinned, cache_dir, parse_lockfile
from repro.fetch.index import Link
from repro.fetch.names import parse as parse_dist
from repro.fetch.pick import candidates, target_tags
from repro.fetch.pinned import Fetched, fetch_pinned
from repro.fetch.reach import check_reachable
from repro.fetch.sources import Sources, host_sources
from repro.store.limits import TEMPLATES

TAG_REPO = "repro-env"
TAG_HEX = 24
LABEL_PREFIX = "org.repro."
LABEL_LOCK = LABEL_PREFIX + "lock-hash"
LABEL_BASE = LABEL_PREFIX + "base-id"
LABEL_TEMPLATE = LABEL_PREFIX + "template"
LABEL_VERSION = LABEL_PREFIX + "version"
LABEL_SOURCE_BUILDS = LABEL_PREFIX + "source-builds"  # the lock's packages built from source, comma-separated
LABEL_CUDA = LABEL_PREFIX + "cuda"  # a CUDA image: the CUDA version its torch wheels are built for
LOCK_NAME = "requirements.lock"
WHEELHOUSE_NAME = "wheelhouse"
LAYERS_DIR = "layers"
_BASE_MARK = "{{base}}"
_BUILD_MARK = "{{build}}"
_INSTALL_MARK = "{{install}}"
BUILD_STAGE = "wheels"  # the first stage: the wheels are copied in and installed there, never in the image
INSTALLED = "/opt/repro-install"  # in that stage: one pip --prefix per layer group, copied into the image
_SHA_CACHE = ".sha256.json"
SHM_SIZE = "2g"  # the container's /dev/shm: DataLoader workers pass batches through it


@dataclass(frozen=True)
class ImageInputs:
    """What a run's environment image is made from, and how its container runs: the backends that
    build an image take these as their own options (`BuildsImage`), every other backend never sees them.

    A capsule that carries its image (``recorded_image`` and ``image_archive``) is replayed in
    exactly that image: reused when the engine has it, else loaded from the archive; never rebuilt.
    """

    lockfile: Path | None = None  # hash-pinned requirements the image is built from
    base_image: str | None = None  # tag or id (None: the default base); docker resolves and records it
    cuda_index: str | None = None  # the cuda.index setting: a CUDA image's wheels come from there too
    shm_size: str = SHM_SIZE
    recorded_image: BuiltImage | None = None  # the image a capsule carries
    image_archive: OpenImage | None = None  # that image's archive: loaded, never rebuilt, when absent

    def to_json(self) -> dict[str, str | None]:
        """The inputs a new run's job file keeps (a carried image is a replay's, never kept)."""
        lockfile = str(self.lockfile) if self.lockfile is not None else None
        return {"lockfile": lockfile, "base_image": self.base_image, "cuda_index": self.cuda_index,
                "shm_size": self.shm_size}  # fmt: skip

    @classmethod
    def from_json(cls, kept: dict[str, Any]) -> ImageInputs:
        """The inputs `to_json` kept (or a job file's older spec, which held the same keys)."""
        lockfile = kept.get("lockfile")
        return cls(
            Path(lockfile) if lockfile else None, kept.get("base_image"), kept.get("cuda_index"),
            str(kept.get("shm_size") or SHM_SIZE),
        )  # fmt: skip


@runtime_checkable
class BuildsImage(Protocol):
    """A backend that builds (or loads) the run's image: it is handed the run's `ImageInputs` before it
    prepares (the registry's ``locks_first`` backends)."""

    def use_image(self, inputs: ImageInputs) -> None: ...


# --------------------------------------------------------------------------- templates


def templates_dir() -> Path:
    """The directory holding the Dockerfile templates, shipped inside the package.

    Raises:
        NotFoundError: they are missing (a broken installation).
    """
    folder = Path(__file__).resolve().parents[1] / "templates"
    if not (folder / "cpu.Dockerfile").is_file():
        raise NotFoundError(
            "the Dockerfile templates are missing from this installation", hint="reinstall repro"
        )
    return folder


def template_for(gpus: str | None) -> str:
    """The template a run needs: ``cuda`` when GPUs are asked for, else ``cpu``."""
    return "cuda" if gpus else "cpu"


def render_dockerfile(template: str, base: str, lock_text: str = "") -> str:
    """The Dockerfile text for ``template`` (cpu|cuda) built FROM ``base`` (a tag or an id),
    installing ``lock_text`` layer by layer.

    Raises:
        NotFoundError: an unknown template name.
        BuildError: a malformed lockfile.
    """
    if template not in TEMPLATES:
        raise NotFoundError(f"unknown image template {template!r}", hint=f"one of: {', '.join(TEMPLATES)}")
    text = (templates_dir() / f"{template}.Dockerfile").read_text()
    build, install = install_steps(lock_text)
    return text.replace(_BASE_MARK, base).replace(_BUILD_MARK, build).replace(_INSTALL_MARK, install)


# --------------------------------------------------------------------------- tags and labels


def _xxh(parts: Iterable[bytes]) -> str:
    h = xxhash.xxh3_128()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def lock_hash(lock: bytes) -> str:
    """xxh3-128 hex of the lockfile's bytes."""
    return xxhash.xxh3_128(lock).hexdigest()


def image_tag(dockerfile: str, lock: bytes, base_id: str, cuda: str | None = None) -> str:
    """The content tag of an environment image: ``repro-env:<24 hex>`` of its three inputs; a CUDA
    image names its CUDA version first (``repro-env:cu12.8-<24 hex>``)."""
    digest = _xxh([b"repro-image/1", dockerfile.encode(), lock, base_id.encode()])
    return f"{TAG_REPO}:{f'cu{cuda}-' if cuda else ''}{digest[:TAG_HEX]}"


def image_labels(
    lock: bytes, base_id: str, template: str, source_builds: Iterable[str] = (), cuda: str | None = None
) -> dict[str, str]:
    """The labels every repro-built image carries (``source_builds``: the normal names of the lock's
    packages that were built from source in the sandbox; ``cuda``: a CUDA image's CUDA version)."""
    labels = {
        LABEL_LOCK: lock_hash(lock),
        LABEL_BASE: base_id,
        LABEL_TEMPLATE: template,
        LABEL_VERSION: __version__,
        LABEL_SOURCE_BUILDS: ",".join(sorted(source_builds)),
    }
    return labels | ({LABEL_CUDA: cuda} if cuda else {})


def cuda_of(lock_text: str) -> str | None:
    """The CUDA version a CUDA image's lock is built for (``12.8``); None when it holds no torch.

    Raises:
        BuildError: a malformed lockfile, or its torch is a CPU build (a CUDA image would have no CUDA).
    """
    found = cuda_build([f"{req.key}=={req.version}" for req in parse_lockfile(lock_text)])
    return found.version if found else None


def installed_from(lock_text: str, labels: dict[str, str]) -> dict[str, str]:
    """{normal name: "wheel" | "source"} for each package of the lock, as an image's labels say it was
    installed; empty when the image does not say (built before repro recorded it).

    Raises:
        BuildError: a malformed lockfile.
    """
    if LABEL_SOURCE_BUILDS not in labels or not lock_text.strip():
        return {}
    built = set(filter(None, labels[LABEL_SOURCE_BUILDS].split(",")))
    return {req.key: ("source" if req.key in built else "wheel") for req in parse_lockfile(lock_text)}


def carried_tag(image_id: str) -> str:
    """The tag a capsule's image gets when it is loaded: ``repro-env:sha256-<24 hex>`` of its
    verified id. Never a name the capsule chose, and never a build's tag (those hash the inputs)."""
    return f"{TAG_REPO}:sha256-{image_id.removeprefix('sha256:')[:TAG_HEX]}"


def is_own_tag(tag: str) -> bool:
    """Whether ``tag`` lies in repro's own namespace (``repro-env:…``)."""
    return tag.startswith(f"{TAG_REPO}:")


# --------------------------------------------------------------------------- layers

# Large wheels get image layers of their own, ahead of the rest, so that adding or bumping a
# small dependency reuses them: only the last layer is installed again. Grouped by name
# (known before any wheel is fetched, so the tag needs no download): every nvidia-* library
# in one layer, each other large project in its own, the ones that change least first. Large
# means a long install too: sympy and setuptools are small wheels of thousands of files.
HEAVY = ("nvidia", "triton", "torch", "torchvision", "torchaudio", "jaxlib", "tensorflow", "xformers",
         "scipy", "numpy", "pandas", "sympy", "networkx", "setuptools")  # fmt: skip
REST = "rest"


def layer_of(key: str) -> str:
    """The layer group of a normalised project name: ``nvidia``, a heavy project's name, or ``rest``."""
    if key.startswith("nvidia-"):
        return "nvidia"
    return key if key in HEAVY else REST


def layer_groups(pinned: list[Pinned]) -> list[tuple[str, list[Pinned]]]:
    """The lock's requirements by layer, in build order: the heavy groups, then the rest."""
    groups: dict[str, list[Pinned]] = {}
    for req in pinned:
        groups.setdefault(layer_of(req.key), []).append(req)
    order = [*HEAVY, REST]
    return [(name, groups[name]) for name in order if name in groups]


def _layer_dir(index: int, name: str) -> str:
    return f"{LAYERS_DIR}/{index:02d}-{name}"


def install_steps(lock_text: str) -> tuple[str, str]:
    """The Dockerfile lines that install the lock: for the build stage, one COPY + RUN pair per layer
    group that installs the group's wheels under a prefix of its own (``pip install --prefix``, every
    locked wheel even where the base image already has that package: the image holds the lock); for
    the image, one ``COPY --from`` per group of what was installed. The wheels stay in the build
    stage: no layer of the image holds a wheel file.

    Raises:
        BuildError: a malformed lockfile.
    """
    build, install = [], []
    for i, (name, _) in enumerate(layer_groups(parse_lockfile(lock_text))):
        folder = _layer_dir(i, name)
        inside = f"/opt/repro-build/{folder}"
        prefix = f"{INSTALLED}/{i:02d}-{name}"
        build.append(
            f"COPY {folder}/ {inside}/\n"
            f"RUN mkdir -p {prefix} && pip install --no-index --no-deps --require-hashes \\\n"
            f"        --ignore-installed --no-warn-script-location --prefix {prefix} \\\n"
            f"        --find-links {inside} -r {inside}/{LOCK_NAME}"
        )
        install.append(f"COPY --from={BUILD_STAGE} {prefix}/ /opt/venv/")
    if not build:
        return "# nothing locked: nothing to install", "# nothing locked: nothing to install"
    return "\n".join(build), "\n".join(install)


def wheelhouse_dir() -> Path:
    """The shared wheelhouse that every build's wheels are fetched into and reused from."""
    return cache_dir() / WHEELHOUSE_NAME


def _sha256_index(wheelhouse: Path) -> dict[str, Path]:
    """sha256 → file for every distribution in the wheelhouse (digests cached by size+mtime)."""
    cache_file = wheelhouse / _SHA_CACHE
    try:
        cached: dict[str, str] = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        cached = {}
    fresh: dict[str, str] = {}
    index: dict[str, Path] = {}
    for path in sorted(wheelhouse.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        st = path.stat()
        stamp = f"{path.name}:{st.st_size}:{st.st_mtime_ns}"
        digest = cached.get(stamp)
        if digest is None:
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            digest = h.hexdigest()
        fresh[stamp] = digest
        index[digest] = path
    if fresh != cached:
        fd, tmp = tempfile.mkstemp(prefix=".sha256-", dir=wheelhouse)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(fresh, sort_keys=True))
        os.replace(tmp, cache_file)
    return index


def _match(
    pinned: list[Pinned], index: dict[str, Path], ranked: list[Tag]
) -> tuple[dict[str, Fetched], list[Pinned]]:
    """The wheelhouse's file for each requirement (a wheel for the target before an sdist), and
    the requirements it has none for."""
    links: dict[str, list[Link]] = {}
    for digest, path in index.items():
        name = parse_dist(path.name)
        if name is not None:
            links.setdefault(name.key, []).append(Link(name, path.as_uri(), digest, str(path.parent)))
    found: dict[str, Fetched] = {}
    missing: list[Pinned] = []
    for req in pinned:
        best = next(iter(candidates(links.get(req.key, []), req, ranked)), None)
        if best is None or best.sha256 is None:
            missing.append(req)
        else:
            found[req.key] = Fetched(req.key, index[best.sha256], best.sha256, best.name.kind)
    return found, missing


def prepare_wheelhouse(
    lockfile: Path,
    wheelhouse: Path | None = None,
    on_line: Callable[[str], None] | None = None,
    python_version: str | None = None,
    sources: Sources | None = None,
    extra_index: str | None = None,
) -> dict[str, Fetched]:
    """The file of each requirement of ``lockfile`` (by normal name, in lock order): a wheel for
    ``python_version`` (X.Y, the image's Python; default the host's) where the release has one,
    else its source distribution. Only files not already in the wheelhouse are downloaded.

    Files are fetched by name, version and sha256 from the indexes and find-links of the host's
    pip configuration (``repro.fetch``); nothing is installed or built on the host, and a file is
    kept only once its sha256 is one the lock names. ``extra_index`` (the cuda.index setting, for a
    CUDA image) is read after those sources, and is first asked once whether it answers at all.

    Raises:
        NotFoundError: the lockfile does not exist.
        BuildError: the lockfile is malformed, or no source has a file matching a pin's hashes.
        IndexUnreadable: a configured index cannot be read.
        IndexUnreachable: ``extra_index`` does not answer.
    """
    if not lockfile.is_file():
        raise NotFoundError(f"no lockfile at {lockfile}", hint="compile one with `repro lock`")
    pinned = parse_lockfile(lockfile.read_text())
    house = wheelhouse or wheelhouse_dir()
    house.mkdir(parents=True, exist_ok=True)
    ranked = target_tags(python_version)
    found, missing = _match(pinned, _sha256_index(house), ranked)
    if missing:
        if on_line:
            on_line(f"fetching {len(missing)} of {len(pinned)} pinned distributions into {house}")
        if extra_index:
            check_reachable(extra_index)  # seconds, not a timeout per requirement
            sources = sources if sources is not None else host_sources()
            if extra_index not in sources.indexes:
                sources = dataclasses.replace(sources, indexes=(*sources.indexes, extra_index))
        found.update(fetch_pinned(missing, house, python_version, sources, on_line))
    return {req.key: found[req.key] for req in pinned}


# --------------------------------------------------------------------------- build context


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


@dataclass(frozen=True)
class Wheel:
    """A wheel that goes into the image, and the digest ``pip install --require-hashes`` checks there."""

    path: Path
    built_sha256: str | None = None  # built from source in the sandbox: its own digest; None: the lock's

    def lock_line(self, req: Pinned) -> str:
        """The requirement line the image's install checks this wheel against."""
        if self.built_sha256 is None:
            return req.text
        marker = f" ; {req.marker}" if req.marker else ""
        return f"{req.name}=={req.version}{marker} --hash=sha256:{self.built_sha256}"


def write_context(dest: IO[bytes], dockerfile: str, lock: bytes, wheels: dict[str, Wheel]) -> None:
    """Write the build context tar: ``Dockerfile`` and, per layer group, ``layers/NN-name/`` holding
    that group's part of the lockfile and its wheels.

    Every wheel is installed with ``--require-hashes``: a wheel from an index against the lock's
    digests, a wheel built from a pinned sdist against the digest it left the sandbox with.

    Raises:
        BuildError: a malformed lockfile, or a requirement without its wheel.
    """
    groups = layer_groups(parse_lockfile(lock.decode())) if lock.strip() else []
    with tarfile.open(fileobj=dest, mode="w") as tar:
        _add_bytes(tar, "Dockerfile", dockerfile.encode())
        for i, (name, reqs) in enumerate(groups):
            folder = _layer_dir(i, name)
            _add_dir(tar, folder)
            missing = [r for r in reqs if r.key not in wheels]
            if missing:
                raise BuildError(f"no wheel for {missing[0].name}=={missing[0].version} in the wheelhouse")
            text = "\n".join(wheels[r.key].lock_line(r) for r in reqs) + "\n"
            _add_bytes(tar, f"{folder}/{LOCK_NAME}", text.encode())
            for req in sorted(reqs, key=lambda r: r.key):
                wheel = wheels[req.key].path
                _add_file(tar, wheel, f"{folder}/{wheel.name}")


def _add_dir(tar: tarfile.TarFile, name: str) -> None:
    folder = tarfile.TarInfo(name)
    folder.type = tarfile.DIRTYPE
    folder.mode = 0o755
    tar.addfile(folder)


def _add_file(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    info = tar.gettarinfo(str(path), arcname=arcname)
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = 0o644
    info.mtime = 0  # the layer cache keys on content and metadata: the same wheel, the same layer
    with open(path, "rb") as f:
        tar.addfile(info, f)
