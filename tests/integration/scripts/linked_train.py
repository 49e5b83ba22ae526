"""Logistic regression on a CSV, shaped like public training code: argparse, a checkpoints folder with
a `last.json` link to the newest checkpoint, the model saved in the working directory, tqdm-style lines.

With --plant FILE it also does what a hostile script can do to the host that collects its results:
links to FILE (and to /etc/shadow, and to FILE's directory) among its outputs, links in place of
repro's own report files in the runtime directory, and a process report naming FILE by a path that
leaves the project (--plant-rel, FILE relative to the project root as the host sees it).
"""

import argparse
import json
import math
import os
import random
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="data/points.csv")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.5)
parser.add_argument("--out", default="outputs")
parser.add_argument("--plant", default=None)
parser.add_argument("--plant-rel", default=None)
args = parser.parse_args()

rows = [tuple(float(v) for v in line.split(",")) for line in Path(args.data).read_text().split()]
w = [0.0, 0.0, 0.0]
ckpt = Path("checkpoints")
ckpt.mkdir(exist_ok=True)
for epoch in range(args.epochs):
    random.shuffle(rows)
    total = 0.0
    for x0, x1, y in rows:
        p = 1 / (1 + math.exp(-(w[0] * x0 + w[1] * x1 + w[2])))
        total += -(y * math.log(p + 1e-12) + (1 - y) * math.log(1 - p + 1e-12))
        g = p - y
        w = [w[0] - args.lr * g * x0, w[1] - args.lr * g * x1, w[2] - args.lr * g]
    n = len(rows)
    print(f"epoch {epoch}: 100%|##########| {n}/{n} [00:00<00:00] loss={total / n:.6f}", flush=True)
    (ckpt / f"ckpt_{epoch}.json").write_text(json.dumps({"epoch": epoch, "w": w}))
    last = ckpt / "last.json"
    if last.is_symlink():
        last.unlink()
    os.symlink(f"ckpt_{epoch}.json", last)
Path(args.out).mkdir(exist_ok=True)
Path("model.json").write_text(json.dumps(w))
Path(args.out, "metrics.json").write_text(json.dumps({"loss": total / n}))


def plant(secret: str, rel: str) -> None:
    os.symlink(secret, os.path.join(args.out, "leak"))
    os.symlink(os.path.dirname(secret), os.path.join(args.out, "keys"))
    os.symlink("/etc/shadow", "model.pt")
    os.symlink("/nonexistent/dangling", "dangling.pt")
    runtime = os.environ["REPRO_RUNTIME_DIR"]
    for name in ("metrics.jsonl", "params.json", "boot-error.1.txt", "links.jsonl", "metrics.rank1.jsonl",
                 "env.rank1.json", "proc.1.jsonl", "rtrace.rank0.jsonl"):  # fmt: skip
        path = os.path.join(runtime, name)
        if os.path.lexists(path):
            os.remove(path)
        os.symlink(secret, path)
    os.symlink("/nonexistent/dangling", os.path.join(runtime, "trace.jsonl"))
    os.symlink(os.path.dirname(secret), os.path.join(runtime, "ranks"))
    log = os.path.join(os.path.dirname(runtime), "stdout.log")  # the local backend's log, beside it
    if os.path.exists(log):
        os.remove(log)
        os.symlink(secret, log)
    with open(os.path.join(runtime, f"proc.{os.getpid()}.jsonl"), "a") as f:
        for path in (rel, f"{args.out}/../{rel}", f"checkpoints/x/../../{rel}"):
            f.write(json.dumps({"e": "w", "p": path}) + "\n")
            f.write(json.dumps({"e": "r", "p": path}) + "\n")


if args.plant:
    plant(args.plant, args.plant_rel)
print("done", flush=True)
