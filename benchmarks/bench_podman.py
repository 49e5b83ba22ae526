"""Rootless Podman: the fixed overhead of `repro run --backend podman` against `podman run` of the same
image, and against `repro run --backend docker` (and `docker run`); the start-up latency of
`podman system service`, which repro starts for each run.

    python benchmarks/bench_podman.py [--repeats 5] [--build-repeats 2]

Run as root: the Podman side runs as the unprivileged user `scripts/podman-up.sh` makes
($REPRO_PODMAN_USER, default repro-podman), the Docker side as root; as another user, both as that user.
The project has an empty lock (the image is the base image plus repro's layer), no data; the command is
`python -c pass`. Each round runs every case once, in turn (interleaved); medians are printed.

Then a 1 GiB image build (`--build-repeats`, 0 skips it): an image `FROM` the base image whose one layer is
a file of 1 GiB of random bytes made in the build (offline, `--network none`, no cache), built the way repro
builds (`podman system service` started for it, the build sent through its Docker-compatible API socket by
the Docker SDK: the service's start-up is in the time) against `podman build` of the same Dockerfile; the
two interleaved, each image removed after it is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
USER = os.environ.get("REPRO_PODMAN_USER", "repro-podman")
COMMAND = ["python", "-c", "pass"]
SERVICE_PROBE = """\
import socket, subprocess, sys, tempfile, time, os
d = tempfile.mkdtemp(prefix="bench-podman-")
sock = os.path.join(d, "s.sock")
began = time.monotonic()
p = subprocess.Popen(["podman", "system", "service", "--time=0", "unix://" + sock],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while True:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(sock)
        break
    except OSError:
        time.sleep(0.005)
    finally:
        s.close()
print(time.monotonic() - began)
p.terminate(); p.wait()
"""


BUILD_GIB = 1
DOCKERFILE = f"FROM {{base}}\nRUN head -c {BUILD_GIB}G /dev/urandom > /blob && ls -l /blob\n"
API_BUILD = """\
import io, sys, time
from repro.backends.docker.engine import engine, served_at
from repro.backends.podman.service import Service
began = time.monotonic()
service = Service()
service.start()
try:
    with served_at(service.url), engine(timeout=1800) as client:
        stream = client.api.build(fileobj=io.BytesIO(sys.argv[1].encode()), tag=sys.argv[2], rm=True,
                                  nocache=True, network_mode="none", decode=True)
        for chunk in stream:
            if chunk.get("error"):
                sys.exit(chunk["error"])
finally:
    service.stop()
print(time.monotonic() - began)
"""


def _as_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", USER, "--", *argv] if os.getuid() == 0 else argv


def _python() -> tuple[list[str], dict[str, str]]:
    """An interpreter the Podman side may run repro with, and its PYTHONPATH."""
    if os.getuid() != 0:
        return [sys.executable], {"PYTHONPATH": str(REPO)}
    system = f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"
    return [system], {"PYTHONPATH": f"{REPO}:{sysconfig.get_paths()['purelib']}"}


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    began = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    took = time.monotonic() - began
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:6])}… failed: {done.stderr.strip()[-400:]}")
    return took


def _project(owner: str | None) -> Path:
    root = Path(tempfile.mkdtemp(prefix="repro-bench-podman-"))
    (root / "requirements.in").write_text("")
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@e"]
    for argv in (["git", "init", "-q"], [*git, "commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(argv, cwd=root, check=True, capture_output=True)
    if owner:
        pw = pwd.getpwnam(owner)
        for path in [root, *root.rglob("*")]:
            os.chown(path, pw.pw_uid, pw.pw_gid, follow_symlinks=False)
    return root


def _image(repro: list[str], cwd: Path, env: dict[str, str]) -> str:
    shown = subprocess.run(
        [*repro, "show", "latest", "--json"], cwd=cwd, env=env, capture_output=True, text=True
    )
    return str(json.loads(shown.stdout)["deps"]["image"]["id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="rounds of the run overhead (0: none)")
    parser.add_argument("--build-repeats", type=int, default=2, help="rounds of the 1 GiB build (0: none)")
    args = parser.parse_args()
    if shutil.which("podman") is None:
        sys.exit("bench_podman: no podman here (scripts/podman-up.sh, as root)")
    python, path = _python()
    owner = USER if os.getuid() == 0 else None
    home = pwd.getpwnam(owner).pw_dir if owner else os.environ.get("HOME", "/tmp")
    user_env = {"PATH": os.environ["PATH"], "HOME": home, "NO_COLOR": "1", **path}
    if not args.repeats:
        _builds(args.build_repeats, python, user_env)
        return
    root_env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
    pod_proj, dock_proj = _project(owner), _project(None)
    pod_repro = _as_user(["env", *(f"{k}={v}" for k, v in user_env.items()), *python, "-m", "repro"])
    dock_repro = [sys.executable, "-m", "repro"]
    print("first runs build or reuse the images (untimed)", file=sys.stderr)
    _timed([*pod_repro, "run", "--backend", "podman", "--", *COMMAND], pod_proj, root_env)
    pod_image = _image(pod_repro, pod_proj, root_env)
    cases: dict[str, Callable[[], float]] = {
        "service start-up": lambda: float(
            subprocess.run(
                _as_user([python[0], "-c", SERVICE_PROBE]),
                cwd="/",
                capture_output=True,
                text=True,
                check=True,
            ).stdout  # fmt: skip
        ),
        "repro run --backend podman": lambda: _timed(
            [*pod_repro, "run", "--backend", "podman", "--", *COMMAND], pod_proj, root_env
        ),
        "podman run --rm (same image)": lambda: _timed(
            _as_user(["podman", "run", "--rm", "--network=none", pod_image, *COMMAND]), Path("/"), root_env
        ),
    }
    docker = (
        shutil.which("docker") and subprocess.run(["docker", "info"], capture_output=True).returncode == 0
    )
    if docker:
        _timed([*dock_repro, "run", "--backend", "docker", "--", *COMMAND], dock_proj, root_env)
        dock_image = _image(dock_repro, dock_proj, root_env)
        cases["repro run --backend docker"] = lambda: _timed(
            [*dock_repro, "run", "--backend", "docker", "--", *COMMAND], dock_proj, root_env
        )
        cases["docker run --rm (same image)"] = lambda: _timed(
            ["docker", "run", "--rm", "--network=none", dock_image, *COMMAND], Path("/"), root_env
        )
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, case in cases.items():
            times[name].append(case())
    med = {name: statistics.median(runs) for name, runs in times.items()}
    print(f"{'case':34} {'median s':>9}   runs (s)")
    for name, runs in times.items():
        print(f"{name:34} {med[name]:9.2f}   {' '.join(f'{r:.2f}' for r in runs)}")
    bare = med["podman run --rm (same image)"]
    print(f"\nrepro on podman / podman run:            {med['repro run --backend podman'] / bare:.2f}x")
    if docker:
        pod, dock = med["repro run --backend podman"], med["repro run --backend docker"]
        print(f"repro on podman / repro on docker:       {pod / dock:.2f}x")
        print(f"repro on docker / docker run:            {dock / med['docker run --rm (same image)']:.2f}x")
    if args.build_repeats:
        _builds(args.build_repeats, python, user_env)
    for proj in (pod_proj, dock_proj):
        subprocess.run(_as_user(["podman", "unshare", "rm", "-rf", str(proj)]), capture_output=True)
        shutil.rmtree(proj, ignore_errors=True)


def _builds(repeats: int, python: list[str], user_env: dict[str, str]) -> None:
    """The 1 GiB build through the API socket (as repro builds) against `podman build`, interleaved."""
    base = os.environ.get("REPRO_BASE_IMAGE", "repro-base:bookworm")
    dockerfile = DOCKERFILE.format(base=base)
    tag = f"repro-bench-build:{os.getpid()}"
    env = {**os.environ, **user_env}
    context = Path(tempfile.mkdtemp(prefix="repro-bench-build-"))
    (context / "Dockerfile").write_text(dockerfile)
    os.chmod(context, 0o755)
    os.chmod(context / "Dockerfile", 0o644)
    user = ["env", *(f"{k}={v}" for k, v in user_env.items())]
    api = _as_user([*user, *python, "-c", API_BUILD, dockerfile, tag])
    cli = _as_user(["podman", "build", "--no-cache", "--network=none", "-q", "-t", tag, str(context)])
    remove = _as_user(["podman", "rmi", "-f", tag])
    cases: dict[str, Callable[[], float]] = {
        f"{BUILD_GIB} GiB build, API socket (repro)": lambda: _timed(api, Path("/"), env),
        f"{BUILD_GIB} GiB build, podman build": lambda: _timed(cli, Path("/"), env),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for _ in range(repeats):
            for name, case in cases.items():
                times[name].append(case())
                subprocess.run(remove, capture_output=True)
    finally:
        subprocess.run(remove, capture_output=True)
        shutil.rmtree(context, ignore_errors=True)
    med = {name: statistics.median(runs) for name, runs in times.items()}
    print()
    for name, runs in times.items():
        print(f"{name:34} {med[name]:9.2f}   {' '.join(f'{r:.2f}' for r in runs)}")
    api_s, cli_s = med.values()
    print(f"\nbuild through the API socket / podman build: {api_s / cli_s:.2f}x")


if __name__ == "__main__":
    main()
