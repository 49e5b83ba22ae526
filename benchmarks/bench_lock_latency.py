"""Time to the command's first line when the lock must be compiled, vs compiling it first.

    python benchmarks/bench_lock_latency.py

A project declares `torch>=2.6` and `numpy` (a range: the lock must be compiled) and has no
lock yet; each measurement uses an empty repro cache. `repro run --backend local` starts the
command at once and compiles the lock beside it (the record waits for it); the peer is the
order this replaces: `repro lock` first, then the run. Prints the time to the first line of
the command's output for both (target: at most 3 s for repro run) and the whole run's time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The script prints its configuration first, then imports torch (which alone takes seconds on a
# loaded machine, with or without repro): the first line measures repro, the second the command.
SCRIPT = """
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()
print("config", vars(args), flush=True)
import torch
print("training starts", flush=True)
torch.manual_seed(1337)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(args.epochs):
    x, y = torch.randn(64, 8), torch.randint(0, 2, (64,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
"""


def _project(root: Path) -> None:
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "train.py").write_text(SCRIPT)
    (root / "requirements.txt").write_text("torch>=2.6\nnumpy\n")
    (root / "repro.yaml").write_text("backend: local\n")


def _first_line(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """Seconds until the command's first line, until its line after `import torch`, until the end."""
    start = time.monotonic()
    out = subprocess.PIPE
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    seen: dict[str, float] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        for marker in ("config", "training starts"):
            if marker in line and marker not in seen:
                seen[marker] = time.monotonic() - start
    if proc.wait() != 0:
        raise SystemExit(f"{argv} failed")
    return seen["config"], seen["training starts"], time.monotonic() - start


def main() -> None:
    repro = [sys.executable, "-m", "repro"]
    with tempfile.TemporaryDirectory(prefix="repro-bench-lock-") as tmp:
        base = Path(tmp)
        run = repro + ["run", "--seed", "1", "--", "python", "train.py"]
        _project(base / "a")
        env = {**os.environ, "NO_COLOR": "1", "REPRO_CACHE_DIR": str(base / "cache-a")}
        bare = _first_line([sys.executable, "train.py"], base / "a", env)
        first, torch_line, total = _first_line(run, base / "a", env)
        _project(base / "b")
        env_b = {**os.environ, "NO_COLOR": "1", "REPRO_CACHE_DIR": str(base / "cache-b")}
        start = time.monotonic()
        subprocess.run(repro + ["lock"], cwd=base / "b", env=env_b, check=True, capture_output=True)
        compile_s = time.monotonic() - start
        peer = _first_line(run, base / "b", env_b)
    print(
        f"bare python train.py:                    first line {bare[0]:6.2f} s, after import torch "
        f"{bare[1]:6.2f} s, ends {bare[2]:6.1f} s"
    )
    print(
        f"repro run, lock compiled beside the run: first line {first:6.2f} s, after import torch "
        f"{torch_line:6.2f} s, sealed {total:6.1f} s"
    )
    print(
        f"repro lock ({compile_s:.1f} s), then repro run:  first line {compile_s + peer[0]:6.2f} s, "
        f"after import torch {compile_s + peer[1]:6.2f} s, sealed {compile_s + peer[2]:6.1f} s"
    )
    print(f"first line target <= 3 s: {'met' if first <= 3 else 'missed'}")


if __name__ == "__main__":
    main()
