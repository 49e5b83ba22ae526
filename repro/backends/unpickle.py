"""Tensor files that only a full unpickling reads (``weights_only=False``), read in the container sandbox.

Unpickling runs whatever code the pickle names, and a capsule's pickle is someone else's: it is never
unpickled in repro's process. Here a throw-away container — no network, no capabilities, nobody as its
user, the two files alone mounted read-only — loads both and writes them back as plain tensors and
values, which the host reads with ``weights_only=True``. The image is one the runs ran in (their torch),
else the newest image repro built. With no engine, or no image with torch, the files are compared
by bytes and the verdict says why (`repro.errors.SandboxUnavailable`).
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from repro.errors import ReproError, SandboxUnavailable

MAX_TRIED = 3  # images tried for one with torch
MAX_PLAIN_BYTES = 8 << 30  # what the sandbox may hand back
TIMEOUT_S = 300
NO_TORCH = 3  # the script's exit status where the image has no torch

# Runs inside the container. Each object becomes dicts, lists, tensors and plain values (a module by its
# state_dict, an object by its attributes, anything else by its repr), saved where the host collects it.
SCRIPT = r"""
import os, sys
try:
    import torch
except ImportError:
    sys.exit(3)

def plain(obj, depth=0):
    if depth > 64:
        return repr(obj)[:200]
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().contiguous()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, dict):
        return {str(k): plain(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v, depth + 1) for v in obj]
    if hasattr(obj, "__array__"):
        try:
            return torch.as_tensor(obj.__array__())
        except Exception:
            pass
    if callable(getattr(obj, "state_dict", None)):
        try:
            return plain(obj.state_dict(), depth + 1)
        except Exception:
            pass
    if hasattr(obj, "__dict__"):
        return plain(vars(obj), depth + 1)
    return repr(obj)[:200]

os.makedirs("/tmp/out", exist_ok=True)
for name in ("a", "b"):
    obj = torch.load("/in/" + name, map_location="cpu", weights_only=False)
    torch.save(plain(obj), "/tmp/out/" + name + ".pt")
"""


def unpickle_sandboxed(a: Path, b: Path, images: Sequence[str]) -> tuple[Path, Path]:
    """Both files loaded in the container sandbox, written back as plain tensor files (in one scratch
    directory the caller removes).

    Raises:
        SandboxUnavailable: no engine answers, no image has torch, or the files did not load there.
    """
    from repro.backends.docker.engine import engine_available
    from repro.backends.docker.gc import repro_images

    if not engine_available():
        raise SandboxUnavailable(SandboxUnavailable.NO_ENGINE)
    scratch = Path(tempfile.mkdtemp(prefix="repro-unpickle-"))
    try:
        inbox = scratch / "in"
        inbox.mkdir()
        for name, source in (("a", a), ("b", b)):  # copies the container's user may read, and nothing else
            shutil.copyfile(source, inbox / name)
            (inbox / name).chmod(0o444)
        return _first_image_with_torch([*images, *repro_images()], inbox, scratch)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def _first_image_with_torch(candidates: list[str], inbox: Path, scratch: Path) -> tuple[Path, Path]:
    from repro.backends.docker.sandbox import run_unpickler

    tried = list(dict.fromkeys(candidates))[:MAX_TRIED]
    outbox = scratch / "out.tar"
    for image in tried:
        try:
            status, lines = run_unpickler(image, inbox, SCRIPT, outbox, TIMEOUT_S)
        except ReproError as e:
            raise SandboxUnavailable(f"the container sandbox could not load them ({e})") from e
        if status == NO_TORCH:
            continue
        if status != 0:
            last = lines[-1] if lines else f"exit status {status}"
            raise SandboxUnavailable(f"they did not load in the container sandbox ({last})")
        return _extracted(outbox, scratch)
    raise SandboxUnavailable("no local image has torch to load them in the container sandbox")


def _extracted(outbox: Path, scratch: Path) -> tuple[Path, Path]:
    """The two plain files from the sandbox's tar (untrusted: regular files of the two names only)."""
    found: dict[str, Path] = {}
    with tarfile.open(outbox) as tar:
        for member in tar.getmembers():
            name = member.name.rsplit("/", 1)[-1]
            if member.isfile() and name in ("a.pt", "b.pt") and member.size <= MAX_PLAIN_BYTES:
                source = tar.extractfile(member)
                if source is not None:
                    found[name] = scratch / f"plain-{name}"
                    with source, open(found[name], "wb") as out:
                        shutil.copyfileobj(source, out)
    if set(found) != {"a.pt", "b.pt"}:
        raise SandboxUnavailable("the container sandbox wrote no plain copy of them")
    return found["a.pt"], found["b.pt"]
