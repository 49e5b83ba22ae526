"""Sharing a run through a registry: `repro push` and `repro pull` of the quick-start run against a plain
upload and download of its capsule tar, on loopback.

    python benchmarks/bench_registry.py

A real registry (Debian's `docker-registry`, TLS and basic auth, as the tests start it) serves on
127.0.0.1. Rows: `repro push` to a repository that holds nothing yet, against one monolithic upload of
the run's capsule tar (`repro export`) as a single blob through the same API; `repro push` of the run
again (every blob already there); `repro pull` into a fresh directory, against one GET of that blob.
Interleaved; medians. The quick-start runs on the local backend here, so no image travels; the image
path is the same upload (`docker save`'s layers, each once) and is not timed.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
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


def run(repeats: int = 3) -> list[Row]:
    from tests import registryserver

    cases = ("repro push of the quick-start run, empty repository", "repro push of the same run again",
             "repro pull into a fresh directory")  # fmt: skip
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
        return [
            Row(cases[0], f"one upload of the capsule tar ({size})", median_sample(up), median_sample(cold),
                INFO, "overhead", 0.0, note="repro: a process start, one HEAD and one upload a blob"),
            Row(cases[1], "the same plain upload", median_sample(up), median_sample(warm), INFO, "overhead",
                0.0, note="every blob already there: HEADs and the manifest only"),
            Row(cases[2], "one GET of the capsule tar blob", median_sample(down), median_sample(pulled), INFO,
                "overhead", 0.0, note="repro: every layer checked, the capsule verified and imported"),
        ]  # fmt: skip


if __name__ == "__main__":
    print_rows(run())
