"""Sharing a run through a registry: `repro push` and `repro pull` of the quick-start run against a plain
upload and download of its capsule tar, on loopback.

    python benchmarks/bench_registry.py

A real registry (Debian's `docker-registry`, TLS and basic auth, as the tests start it) serves on
127.0.0.1. Rows: `repro push` to a repository that holds nothing yet, against one monolithic upload of
the run's capsule tar (`repro export`) as a single blob through the same API; `repro push` of the run
again (every blob already there); `repro pull` into a fresh directory, against one GET of that blob.
Interleaved; medians. The quick-start runs on the local backend here, so no image travels with the
run; the image row times the image path on its own: repro's image push (`docker save`, then each layer
once, uncompressed, and the OCI manifest) against `skopeo copy docker-daemon:IMAGE docker://…` of the
same image into an empty repository of the same registry (skopeo's defaults: it compresses the layers
with gzip). IMAGE is $REPRO_BENCH_IMAGE when set (a run's `repro-env:…` image, say), else a one-layer
image of 64 MiB of incompressible bytes made here with `docker import` and removed after. repro's side
is timed in-process, skopeo's with its process start (a few ms). Skipped without a Docker engine.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import (
    INFO,
    Row,
    log,
    median_sample,
    print_rows,
    repro_env,
    repro_exe,
    run_timed,
    scratch,
    time_inprocess,
)

QUICKSTART = Path(__file__).resolve().parent.parent / "recipes" / "quickstart"


def _plain(host: str, ca: Path, repo: str, tar: Path, user: str, password: str) -> tuple[float, float]:
    """One monolithic upload of ``tar`` as one blob (POST, then PUT with its digest)."""
    import requests

    digest = "sha256:" + hashlib.sha256(tar.read_bytes()).hexdigest()

    def upload() -> None:
        auth, base = (user, password), f"https://{host}/v2/{repo}/blobs/uploads/"
        started = requests.post(base, auth=auth, verify=str(ca), timeout=60)
        location = requests.compat.urljoin(base, started.headers["Location"])
        with open(tar, "rb") as f:
            done = requests.put(f"{location}&digest={digest}", data=f, auth=auth, verify=str(ca), timeout=600)
        done.raise_for_status()

    return time_inprocess(upload)


def _plain_get(host: str, ca: Path, repo: str, tar: Path, user: str, password: str) -> tuple[float, float]:
    import requests

    digest = "sha256:" + hashlib.sha256(tar.read_bytes()).hexdigest()

    def download() -> None:
        url = f"https://{host}/v2/{repo}/blobs/{digest}"
        got = requests.get(url, auth=(user, password), verify=str(ca), timeout=600).content
        assert hashlib.sha256(got).hexdigest() == digest.removeprefix("sha256:")

    return time_inprocess(download)


IMAGE_CASE = "an image to an empty repository: repro's image push vs skopeo copy"


@contextmanager
def _bench_image(base: Path) -> Iterator[tuple[str, str]]:
    """(tag, id) of the image the image row pushes: $REPRO_BENCH_IMAGE, or a 64 MiB one made here."""
    named = os.environ.get("REPRO_BENCH_IMAGE")
    if named:
        found = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", named],
                               capture_output=True, text=True, check=True)  # fmt: skip
        yield named, found.stdout.strip()
        return
    rootfs = base / "rootfs"
    rootfs.mkdir()
    for i in range(4):
        (rootfs / f"weights-{i}.bin").write_bytes(os.urandom(16 << 20))
    subprocess.run(["tar", "-C", str(rootfs), "-cf", str(base / "rootfs.tar"), "."], check=True)
    tag = f"repro-bench-registry-{os.getpid()}:v1"
    made = subprocess.run(["docker", "import", str(base / "rootfs.tar"), tag], capture_output=True, text=True,
                          check=True)  # fmt: skip
    try:
        yield tag, made.stdout.strip()
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def _image_row(reg: object, base: Path, repeats: int) -> Row:
    """repro's image push against `skopeo copy` of the same image, interleaved."""
    from repro.share.client import Registry
    from repro.share.image import push_image
    from repro.share.reference import parse
    from tests import registryserver

    assert isinstance(reg, registryserver.Registry)
    why = "no skopeo here" if shutil.which("skopeo") is None else None
    if why is None and subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        why = "no Docker engine answers"
    if why is not None:
        return Row(IMAGE_CASE, "skopeo copy of the same image", None, None, INFO, "within", 0.0, skipped=why)
    saved = {name: os.environ.get(name) for name in reg.env()}
    os.environ.update(reg.env())  # the registry's CA and login, for both sides
    try:
        with _bench_image(base) as (tag, image_id):
            ours, theirs = [], []
            for i in range(repeats):
                work = base / f"image-{i}"
                work.mkdir()
                registry = Registry(parse(f"{reg.host}/bench/image-repro-{i}:unused"), push=True)
                ours.append(time_inprocess(functools.partial(push_image, registry, image_id, tag, work)))
                shutil.rmtree(work)
                dest = f"docker://{reg.host}/bench/image-skopeo-{i}:v1"
                theirs.append(run_timed(["skopeo", "copy", "--quiet", f"docker-daemon:{tag}", dest]))
            size = subprocess.run(["docker", "image", "inspect", "--format", "{{.Size}}", image_id],
                                  capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return Row(IMAGE_CASE, f"skopeo copy of the same image ({int(size) >> 20} MiB)", median_sample(theirs),
               median_sample(ours), INFO, "within", 0.0,
               note="repro: docker save, layers as they are; skopeo: from the daemon, gzip")  # fmt: skip


def run(repeats: int = 3) -> list[Row]:
    from tests import registryserver

    cases = ("repro push of the quick-start run, empty repository", "repro push of the same run again",
             "repro pull into a fresh directory", IMAGE_CASE)  # fmt: skip
    repro = repro_exe()
    why = "the repro command is not installed (make install)" if repro is None else registryserver.missing()
    if why is not None or repro is None:
        return [
            Row(case, "plain capsule tar upload", None, None, INFO, "within", 0.0, skipped=why)
            for case in cases
        ]
    with scratch("repro-bench-registry-") as base, registryserver.running(base / "registry") as reg:
        env = {**repro_env(), **reg.env()}
        proj = base / "quickstart"
        shutil.copytree(QUICKSTART, proj)
        who = ["-c", "user.name=bench", "-c", "user.email=bench@example"]
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], [*who, "commit", "-qm", "quickstart"]):
            subprocess.run(["git", *args], cwd=proj, check=True)
        log("the quick-start run (local backend, untimed)")
        run_timed(
            [repro, "run", "--backend", "local", "--seed", "42", "--", "python", "train.py"],
            cwd=proj,
            env=env,
        )
        tar = base / "run.tar"
        run_timed([repro, "export", "latest", "-o", str(tar)], cwd=proj, env=env)
        creds = (registryserver.USER, registryserver.PASSWORD)
        cold, warm, pulled, up, down = [], [], [], [], []
        for i in range(repeats):
            ref = f"{reg.host}/bench/runs-{i}:v1"
            up.append(_plain(reg.host, reg.ca, f"bench/tar-{i}", tar, *creds))
            cold.append(run_timed([repro, "push", "latest", ref], cwd=proj, env=env))
            warm.append(run_timed([repro, "push", "latest", ref], cwd=proj, env=env))
            down.append(_plain_get(reg.host, reg.ca, f"bench/tar-{i}", tar, *creds))
            fresh = base / f"fresh-{i}"
            fresh.mkdir()
            pulled.append(run_timed([repro, "pull", ref], cwd=fresh, env=env))
        size = f"capsule {tar.stat().st_size >> 10} KiB"
        log("an image: repro's image push and skopeo copy, interleaved")
        image = _image_row(reg, base, repeats)
        return [
            Row(cases[0], f"one upload of the capsule tar ({size})", median_sample(up), median_sample(cold),
                INFO, "overhead", 0.0, note="repro: a process start, one HEAD and one upload a blob"),
            Row(cases[1], "the same plain upload", median_sample(up), median_sample(warm), INFO, "overhead",
                0.0, note="every blob already there: HEADs and the manifest only"),
            Row(cases[2], "one GET of the capsule tar blob", median_sample(down), median_sample(pulled), INFO,
                "overhead", 0.0, note="repro: every layer checked, the capsule verified and imported"),
            image,
        ]  # fmt: skip


if __name__ == "__main__":
    print_rows(run())
