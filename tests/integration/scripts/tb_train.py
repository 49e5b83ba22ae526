"""A self-seeding training script in the shape of public examples.

argparse flags, torch.manual_seed(1337) inside, DataLoader workers with random augmentation,
TensorBoard through SummaryWriter (default log dir: runs/<date>_<host>), a tqdm-style
progress bar, word_language_model-style `ms/batch` lines, checkpoints in their own folder
and the model saved to the working directory.
"""

import argparse
import json
import math
import os
import socket
import sys
import time
from datetime import datetime

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.tensorboard import SummaryWriter


class Blobs(Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.y = torch.arange(n) % 2
        self.x = torch.randn(n, 4, generator=g) + self.y[:, None] * 1.5

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i] + torch.randn(4) * 0.05, self.y[i]  # random augmentation in the worker


def bar(i: int, n: int, start: float) -> str:
    elapsed = time.time() - start
    rate = i / elapsed if elapsed > 0 else 0.0
    left = (n - i) / rate if rate else 0.0
    fill = "█" * (10 * i // n)
    clock = lambda s: f"{int(s) // 60:02d}:{int(s) % 60:02d}"  # noqa: E731
    return f"{100 * i // n:3d}%|{fill:<10}| {i}/{n} [{clock(elapsed)}<{clock(left)}, {rate:6.2f}it/s]"


parser = argparse.ArgumentParser(description="toy classifier")
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--samples", type=int, default=64)
parser.add_argument("--output-dir", default=".", help="where runs/, checkpoints/ and metrics.json go")
parser.add_argument("--logdir", default=None, help="TensorBoard directory (default: runs/<date>_<host>)")
parser.add_argument("--save", default="model.pt")
args = parser.parse_args()
# SummaryWriter's own default directory name, under the output directory
stamp = datetime.now().strftime("%b%d_%H-%M-%S") + "_" + socket.gethostname()
logdir = args.logdir or os.path.join(args.output_dir, "runs", stamp)
checkpoints = os.path.join(args.output_dir, "checkpoints")

torch.manual_seed(1337)
loader = DataLoader(Blobs(args.samples), batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
writer = SummaryWriter(logdir)
os.makedirs(checkpoints, exist_ok=True)
step = 0
for epoch in range(1, args.epochs + 1):
    start = time.time()
    total = 0.0
    for i, (x, y) in enumerate(loader, 1):
        t0 = time.time()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        total += loss.item()
        writer.add_scalar("train/loss", loss.item(), step)
        sys.stdout.write("\r" + bar(i, len(loader), start))
        sys.stdout.flush()
        if i % 2 == 0:
            ms, cur = (time.time() - t0) * 1000, loss.item()
            print(f"\n| epoch {epoch:3d} | {i:3d}/{len(loader):3d} batches | lr {args.lr:.2f} | "
                  f"ms/batch {ms:5.2f} | loss {cur:5.2f} | ppl {math.exp(cur):8.2f}")  # fmt: skip
    writer.add_scalar("train/epoch_loss", total / len(loader), epoch)
    writer.add_histogram("weights/fc1", model[0].weight, epoch)
    print(f"\n| end of epoch {epoch:3d} | time: {time.time() - start:5.2f}s | loss {total / len(loader):.4f}")
    torch.save({"model": model.state_dict(), "epoch": epoch}, os.path.join(checkpoints, f"ep{epoch}.pt"))
writer.close()
torch.save(model.state_dict(), args.save)
with open(os.path.join(args.output_dir, "metrics.json"), "w") as f:
    json.dump({"loss": total / len(loader), "train_runtime": time.time() - start, "epochs": args.epochs}, f)
