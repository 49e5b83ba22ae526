"""A slow pure-python trainer (linear regression by SGD): checkpoints, progress and ms/batch.

Writes its pid to the output directory first, so a test can see whether it outlives repro.
"""

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser(description="slow linear regression")
parser.add_argument("--epochs", type=int, default=600)
parser.add_argument("--batches", type=int, default=10)
parser.add_argument("--sleep", type=float, default=0.1, help="seconds per batch")
parser.add_argument("--out", default="outputs")
parser.add_argument("--ckpt-dir", default="checkpoints")
args = parser.parse_args()

random.seed(1337)
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)
(out / "pid.txt").write_text(str(os.getpid()))
ckpt = out / args.ckpt_dir
ckpt.mkdir(exist_ok=True)
w, b = 0.0, 0.0
print("training started", flush=True)
for epoch in range(args.epochs):
    start = time.perf_counter()
    for _ in range(args.batches):
        x = random.uniform(-1, 1)
        y = 3 * x + 0.5
        err = w * x + b - y
        w -= 0.1 * err * x
        b -= 0.1 * err
        time.sleep(args.sleep)
    ms = (time.perf_counter() - start) * 1000 / args.batches
    bar = f"{args.batches}/{args.batches} [{ms:.1f} ms/batch]"
    sys.stdout.write(f"epoch {epoch}: {bar} loss {err * err:.6f}\n")
    sys.stdout.flush()
    (ckpt / f"epoch{epoch}.json").write_text(json.dumps({"w": w, "b": b, "epoch": epoch}))
print(f"done w={w:.6f} b={b:.6f}")
