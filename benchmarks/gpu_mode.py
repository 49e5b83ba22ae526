"""What gpu mode buys and costs on a GPU machine: identical weights? at what throughput?

Trains a small CNN on fixed synthetic images through `repro run --backend local
--gpus 1`: twice with ``--mode gpu`` and the same seed (are the saved weights
byte-identical, or how far apart are they?) and once per repeat with ``--mode off``
(cudnn.benchmark on, TF32 allowed, no deterministic algorithms) as the peer. The
training script times its own steps after a warm-up, so interpreter and CUDA start-up
are left out of the throughput.

    python benchmarks/gpu_mode.py                 # on a machine where nvidia-smi lists a GPU
    python benchmarks/gpu_mode.py --steps 400 --repeats 3 --json

Exits 3 when no GPU is visible (as `repro run --gpus` does).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

TRAIN = r'''
"""A small CNN on fixed synthetic 3x32x32 images; seeds nothing itself (repro does).

Average pooling only: adaptive pooling's CUDA backward has no deterministic kernel."""
import argparse, json, os, time
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--warmup", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=128)
args = parser.parse_args()

device = torch.device("cuda")
data = torch.Generator().manual_seed(0)  # the data is fixed; the model's init and dropout are repro's
images = torch.randn(4096, 3, 32, 32, generator=data)
labels = torch.randint(0, 10, (4096,), generator=data)
images, labels = images.to(device), labels.to(device)

model = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AvgPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AvgPool2d(2),
    nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AvgPool2d(8), nn.Flatten(),
    nn.Dropout(0.2), nn.Linear(128, 10),
).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
order = torch.randperm(len(labels), device=device)
start = None
for step in range(args.warmup + args.steps):
    if step == args.warmup:
        torch.cuda.synchronize()
        start = time.perf_counter()
    i = order[(step * args.batch_size) % len(labels):][: args.batch_size]
    if len(i) < args.batch_size:
        i = order[: args.batch_size]
    loss = nn.functional.cross_entropy(model(images[i]), labels[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.cuda.synchronize()
seconds = time.perf_counter() - start
os.makedirs("outputs", exist_ok=True)
torch.save({k: v.cpu() for k, v in model.state_dict().items()}, "outputs/model.pt")
with open("outputs/throughput.json", "w") as f:
    json.dump({"samples_per_s": args.steps * args.batch_size / seconds, "loss": loss.item(),
               "gpu": torch.cuda.get_device_name(0)}, f)
print(f"final loss {loss.item():.6f}")
'''


def _git(cwd: Path, *args: str) -> None:
    env_args = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    subprocess.run(["git", *env_args, *args], cwd=cwd, check=True, capture_output=True)


def project(root: Path, files: dict[str, str]) -> None:
    """A git project at ``root`` holding ``files`` (path → text), committed; outputs/ and .repro/ ignored.
    scripts/gpu-check makes its projects with it too."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / ".gitignore").write_text("outputs/\n.repro/\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "bench")


def _run(root: Path, mode: str, seed: int, steps: int, keep: Path) -> dict[str, Any]:
    """One `repro run`; returns the script's throughput report, the weights copied to ``keep``."""
    shutil.rmtree(root / "outputs", ignore_errors=True)
    argv = [sys.executable, "-m", "repro", "run", "--backend", "local", "--gpus", "1", "--mode", mode,
            "--seed", str(seed), "--", "python", "train_cnn.py", "--steps", str(steps)]  # fmt: skip
    proc = subprocess.run(argv, cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"repro run --mode {mode} failed with exit status {proc.returncode}")
    shutil.copyfile(root / "outputs" / "model.pt", keep)
    return dict(json.loads((root / "outputs" / "throughput.json").read_text()))


def difference(a: Path, b: Path) -> dict[str, Any]:
    """Byte identity of two saved state dicts, else the largest element-wise difference and where."""
    if a.read_bytes() == b.read_bytes():
        return {"identical": True, "max_abs": 0.0, "tensor": None}
    import torch

    sa, sb = torch.load(a), torch.load(b)
    worst, where = 0.0, None
    for name, ta in sa.items():
        diff = (ta.double() - sb[name].double()).abs().max().item() if ta.numel() else 0.0
        if diff > worst:
            worst, where = diff, name
    return {"identical": False, "max_abs": worst, "tensor": where}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="timed training steps per run")
    parser.add_argument("--repeats", type=int, default=2, help="throughput: best of N runs per mode")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    if not shutil.which("nvidia-smi"):
        print("no GPU: nvidia-smi is not on PATH (run this on a GPU machine)", file=sys.stderr)
        return 3

    with tempfile.TemporaryDirectory(prefix="repro-gpu-bench-") as tmp:
        root = Path(tmp) / "proj"
        project(root, {"train_cnn.py": TRAIN})
        gpu_runs = [_run(root, "gpu", args.seed, args.steps, Path(tmp) / f"gpu{i}.pt") for i in range(2)]
        gpu_runs += [_run(root, "gpu", args.seed, args.steps, Path(tmp) / "gpu-extra.pt")
                     for _ in range(max(0, args.repeats - 2))]  # fmt: skip
        off_runs = [_run(root, "off", args.seed, args.steps, Path(tmp) / f"off{i}.pt")
                    for i in range(args.repeats)]  # fmt: skip
        same = difference(Path(tmp) / "gpu0.pt", Path(tmp) / "gpu1.pt")

    gpu_rate = max(r["samples_per_s"] for r in gpu_runs)
    off_rate = max(r["samples_per_s"] for r in off_runs)
    result = {
        "gpu": gpu_runs[0]["gpu"],
        "steps": args.steps,
        "gpu_mode_twice": same,
        "samples_per_s": {"gpu": round(gpu_rate, 1), "off": round(off_rate, 1)},
        "gpu_mode_cost": round(off_rate / gpu_rate, 3),  # >1: gpu mode is that many times slower
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    verdict = (
        "identical weights"
        if same["identical"]
        else (f"weights differ: max abs {same['max_abs']:.3g} in {same['tensor']}")
    )
    print(f"{result['gpu']}, {args.steps} steps, seed {args.seed}")
    print(f"  gpu mode, run twice : {verdict}")
    print(f"  throughput (best)   : gpu {gpu_rate:,.0f} samples/s, off {off_rate:,.0f} samples/s")
    print(f"  cost of gpu mode    : ×{result['gpu_mode_cost']} (time per step against mode off)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
