"""A common home-grown shape: self-seeded (torch, NumPy, random), tqdm-style progress on stderr,
TensorBoard through torch.utils.tensorboard into runs/, atomic checkpoints into out/, and the
final weights into the working directory."""

import argparse
import os
import random
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.tensorboard import SummaryWriter


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def progress(epoch, i, n, loss, started):
    rate = (i + 1) / max(time.time() - started, 1e-9)
    bar = "█" * (10 * (i + 1) // n)
    sys.stderr.write(
        f"\repoch {epoch}: {100 * (i + 1) // n:3d}%|{bar:<10}| {i + 1}/{n} [{rate:.2f}it/s, loss={loss:.4f}]"
    )
    if i + 1 == n:
        sys.stderr.write("\n")


parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--out", default="out", help="checkpoint directory")
parser.add_argument("--logdir", default="runs/exp")
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--save", default="final.pt")
parser.add_argument("--entropy", action="store_true", help="initialise from OS entropy")
args = parser.parse_args()

seed_everything(1337)
x = torch.from_numpy(np.random.randn(48, 4).astype("float32"))
y = (x.sum(1) > 0).long()
loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True, num_workers=args.workers)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
if args.entropy:
    with torch.no_grad():
        model[0].weight.add_(int.from_bytes(os.urandom(4), "little") / 2**32 * 1e-2)
opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
writer = SummaryWriter(args.logdir)
os.makedirs(args.out, exist_ok=True)
step = 0
for epoch in range(args.epochs):
    started = time.time()
    for i, (xb, yb) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        writer.add_scalar("train/loss", loss.item(), step)
        progress(epoch, i, len(loader), loss.item(), started)
        step += 1
    tmp = os.path.join(args.out, f".ckpt_{epoch}.tmp")
    torch.save({"epoch": epoch, "model": model.state_dict(), "optim": opt.state_dict()}, tmp)
    os.replace(tmp, os.path.join(args.out, f"ckpt_epoch{epoch}.pt"))
writer.close()
torch.save(model.state_dict(), args.save)
print(f"saved {args.save} after {step} steps")
