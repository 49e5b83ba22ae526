"""`repro run` overhead over the bare command: local backend, and docker with a reused image.

    python benchmarks/bench_run_overhead.py

The project has a reused (already compiled) lockfile and no data. The docker row is
skipped with a message when no engine answers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, Sample, log, print_rows, repro_env, repro_exe, run_timed, scratch

COMMAND = ["python", "-c", "pass"]


def _engine_answers() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _image_of_latest(repro: str, proj: Path) -> str | None:
    out = subprocess.run(
        [repro, "show", "latest", "--json"], cwd=proj, env=repro_env(), capture_output=True, text=True
    )
    try:
        image = json.loads(out.stdout).get("deps", {}).get("image") or {}
    except json.JSONDecodeError:
        return None
    return image.get("tag") or image.get("id")


def run(repeats: int = 5) -> list[Row]:
    """Rows for the local and the docker backend."""
    repro = repro_exe()
    rows: list[Row] = []
    if repro is None:
        why = "the repro command is not installed (make install)"
        return [
            Row(
                "repro run, local backend", "bare command", None, None, "< 1 s", "overhead", 1.0, skipped=why
            ),
            Row(
                "repro run, docker backend", "docker run", None, None, "< 1.5 s", "overhead", 1.5, skipped=why
            ),
        ]
    env = repro_env()
    with scratch("repro-bench-run-") as proj:
        (proj / "repro.yaml").write_text("# benchmark project: no data, no dependencies\n")
        (proj / "requirements.in").write_text("")
        local = [repro, "run", "--backend", "local", "--", *COMMAND]
        log("repro run --backend local: first run compiles the lockfile (untimed)")
        run_timed(local, cwd=proj, env=env)
        bare, ours = Sample(), Sample()
        for _ in range(repeats):
            bare.add(*run_timed(COMMAND, cwd=proj, env=env))
            ours.add(*run_timed(local, cwd=proj, env=env))
        rows.append(
            Row(
                "repro run, local backend",
                "bare `python -c pass`",
                bare,
                ours,
                "< 1 s",
                "overhead",
                1.0,
                note="reused lockfile, no data",
            )
        )

        case = "repro run, docker backend"
        if not _engine_answers():
            log("no Docker engine answers: skipping the docker row")
            rows.append(
                Row(
                    case,
                    "docker run",
                    None,
                    None,
                    "< 1.5 s",
                    "overhead",
                    1.5,
                    skipped="no Docker engine answers (start one with `make docker-up`)",
                )
            )
            return rows
        dock = [repro, "run", "--backend", "docker", "--", *COMMAND]
        log("repro run --backend docker: first run builds or reuses the image (untimed)")
        try:
            run_timed(dock, cwd=proj, env=env)
        except RuntimeError as e:
            rows.append(Row(case, "docker run", None, None, "< 1.5 s", "overhead", 1.5, skipped=str(e)[:300]))
            return rows
        image = _image_of_latest(repro, proj)
        if image is None:
            rows.append(
                Row(
                    case,
                    "docker run",
                    None,
                    None,
                    "< 1.5 s",
                    "overhead",
                    1.5,
                    skipped="the run's record names no image",
                )
            )
            return rows
        start_only = ["docker", "run", "--rm", "--network", "none", image, *COMMAND]
        peer, ours = Sample(), Sample()
        for _ in range(repeats):
            peer.add(*run_timed(start_only, cwd=proj, env=env))
            ours.add(*run_timed(dock, cwd=proj, env=env))
        rows.append(
            Row(
                case,
                "`docker run --rm` of the same image",
                peer,
                ours,
                "< 1.5 s",
                "overhead",
                1.5,
                note=f"image {image} reused",
            )
        )
    return rows


def main() -> None:
    print_rows(run(int(os.environ.get("REPRO_BENCH_REPEATS", "5"))))


if __name__ == "__main__":
    main()
