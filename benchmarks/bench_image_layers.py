"""Image layering: a cold build of the torch environment vs the rebuild after adding one small package.

    python benchmarks/bench_image_layers.py

The cold build runs on a base image of its own (repro-base:bookworm plus a unique label), so no
layer of an earlier build is reused. Then one small package (fsspec) is added to the lock and
the image rebuilt: the torch and numpy layers come from the build cache, only the last layer is
installed again. Prints both times and the ratio (target: at most 0.15). Removes only what it made.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "recipes" / "quickstart" / "lockfiles" / "requirements.lock.txt"
SMALL = "fsspec"


def _without(text: str, name: str) -> str:
    """The lock text without ``name``'s entry (its pin, hashes and comments)."""
    out, skipping = [], False
    for line in text.splitlines():
        if line.startswith(f"{name}=="):
            skipping = True
            continue
        if skipping and line.startswith(" "):
            continue
        skipping = False
        out.append(line)
    return "\n".join(out) + "\n"


def _build(lock: Path, base: str, cwd: Path) -> tuple[float, dict[str, object]]:
    start = time.monotonic()
    argv = [sys.executable, "-m", "repro", "-q", "build", "--lockfile", str(lock), "--base-image", base]
    proc = subprocess.run([*argv, "--json"], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"repro build failed: {proc.stderr[-2000:]}")
    return time.monotonic() - start, json.loads(proc.stdout)


def main() -> None:
    tag = f"repro-bench-base:{uuid.uuid4().hex[:12]}"
    made = [tag]
    with tempfile.TemporaryDirectory(prefix="repro-bench-layers-") as tmp:
        work = Path(tmp)
        (work / "Dockerfile").write_text(f"FROM repro-base:bookworm\nLABEL org.repro.bench={tag}\n")
        subprocess.run(["docker", "build", "-q", "-t", tag, "--label", "org.repro.test=bench", str(work)],
                       check=True, capture_output=True)  # fmt: skip
        before, after = work / "before.lock", work / "after.lock"
        before.write_text(_without(LOCK.read_text(), SMALL))
        after.write_text(LOCK.read_text())
        try:
            cold, first = _build(before, tag, work)
            made.append(str(first["tag"]))
            warm, second = _build(after, tag, work)
            made.append(str(second["tag"]))
        finally:
            subprocess.run(["docker", "rmi", "-f", *made], capture_output=True, check=False)
    ratio = warm / cold
    print(f"cold build (torch lock without {SMALL}, fresh base): {cold:7.1f} s")
    print(f"rebuild after adding {SMALL}:                       {warm:7.1f} s")
    print(f"ratio: {ratio:.3f} (target <= 0.15) on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
