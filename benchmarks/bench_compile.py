"""A first `torch.compile` under `repro run`: a compiled 50-step training run on the docker backend
against the same script in `docker run` of the same image, with equal threads and knobs.

    python benchmarks/bench_compile.py

Both sides compile from a cold cache (each container is fresh; repro gives every run caches of its
own), run one thread, and use Inductor's deterministic mode (repro's strict mode sets it; the peer
gets TORCHINDUCTOR_DETERMINISTIC=1). The image is built once, untimed. Runs are interleaved and the
medians compared: the target is repro adding at most 5% to the script's own cost.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, Row, log, median_sample, print_rows, repro_env, repro_exe, run_timed, scratch

CASE = "compiled 50-step run, docker backend"
PEER = "`docker run` of the same image, same threads and knobs"
TARGET, LIMIT = "<= 1.05x", 1.05
SCRIPT = """\
import torch
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
step = torch.compile(model)
x, y = torch.randn(256, 32), torch.randn(256, 1)
for i in range(50):
    loss = torch.nn.functional.mse_loss(step(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"loss {loss.item():.6f}")
torch.save(model.state_dict(), "model.pt")
"""


def _skipped(why: str) -> list[Row]:
    return [Row(CASE, PEER, None, None, TARGET, "within", LIMIT, skipped=why)]


def _engine_answers() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _project(proj: Path) -> None:
    quick = REPO / "recipes" / "quickstart"
    (proj / "train.py").write_text(SCRIPT)
    shutil.copyfile(quick / "requirements.in", proj / "requirements.in")
    (proj / "lockfiles").mkdir()
    shutil.copyfile(
        quick / "lockfiles" / "requirements.lock.txt", proj / "lockfiles" / "requirements.lock.txt"
    )
    for argv in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.email=b@b", "-c", "user.name=b", "commit", "-qm", "b"],
    ):
        subprocess.run(["git", *argv], cwd=proj, check=True, capture_output=True)


def run(repeats: int = 3) -> list[Row]:
    """One row: repro run against docker run of the image, both compiling from a cold cache."""
    repro = repro_exe()
    if repro is None:
        return _skipped("the repro command is not installed (make install)")
    if not _engine_answers():
        return _skipped("no Docker engine answers (start one with `make docker-up`)")
    env = repro_env()
    with scratch("repro-bench-compile-") as proj:
        _project(proj)
        ours_cmd = [repro, "run", "--backend", "docker", "--mode", "strict", "--", "python", "train.py"]
        log("repro run --backend docker: the first run builds or reuses the image (untimed)")
        try:
            run_timed(ours_cmd, cwd=proj, env=env)
        except RuntimeError as e:
            return _skipped(str(e)[:300])
        shown = subprocess.run(
            [repro, "show", "latest", "--json"], cwd=proj, env=env, capture_output=True, text=True
        )
        image = (json.loads(shown.stdout).get("deps", {}).get("image") or {}).get("id")
        if not image:
            return _skipped("the run's record names no image")
        uid = f"{os.getuid()}:{os.getgid()}"
        knobs = ["HOME=/tmp", "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1", "TORCHINDUCTOR_DETERMINISTIC=1"]
        peer_cmd = ["docker", "run", "--rm", "--network", "none", "--user", uid, "-v", f"{proj}:/work"]
        peer_cmd += ["-w", "/work", *(f"--env={k}" for k in knobs), image, "python", "train.py"]
        peer, ours = [], []
        for i in range(repeats):
            log(f"round {i + 1}/{repeats}: docker run, then repro run")
            peer.append(run_timed(peer_cmd, cwd=proj, env=env))
            ours.append(run_timed(ours_cmd, cwd=proj, env=env))
        note = f"image {image[:19]}, medians of {repeats} interleaved runs, each compiling from a cold cache "
        note += "(wall time: the containers' CPU is not the docker client's)"
        return [Row(CASE, PEER, median_sample(peer), median_sample(ours), TARGET, "within", LIMIT, note=note)]


def main() -> None:
    rows = run(int(os.environ.get("REPRO_BENCH_REPEATS", "3")))
    print_rows(rows)
    for row in rows:
        ratio = row.ratio()
        if ratio is not None:
            print(f"ratio repro/docker run: {ratio:.3f}x (target {TARGET})")


if __name__ == "__main__":
    main()
