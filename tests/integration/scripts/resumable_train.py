"""Train a small classifier on points.csv; resumes from checkpoints/last.pt when it exists.

Shuffling DataLoader with worker processes, random augmentation (torch, NumPy and
`random`) in __getitem__, dropout, Adam and a per-step warm-up/linear-decay LR schedule.
"""

import argparse
import os
import random
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser(description="points classifier")
parser.add_argument("--data", default="data/points.csv")
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--ckpt-dir", default="checkpoints")
parser.add_argument("--save", default="model.pt")
parser.add_argument("--epoch-sleep", type=float, default=0.0, help="seconds of extra work per epoch")
parser.add_argument(
    "--skip-scheduler-state",
    action="store_true",
    help="do not restore the LR schedule when resuming (a bug, on purpose)",
)
args = parser.parse_args()

torch.manual_seed(1337)


class Points(Dataset):
    def __init__(self, path):
        rows = [line.split(",") for line in open(path).read().split()]
        self.x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
        self.y = torch.tensor([int(c) for _, _, c in rows])

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        jitter = torch.randn(2) * 0.05 + torch.from_numpy(np.random.normal(0, 0.05, 2)).float()
        scale = random.uniform(0.9, 1.1)
        return self.x[i] * scale + jitter, self.y[i]


loader = DataLoader(Points(args.data), batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
total_steps = args.epochs * len(loader)
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda s: min(1.0, (s + 1) / 4) * max(0.1, 1.0 - s / max(total_steps, 1))
)

start_epoch = 0
last = os.path.join(args.ckpt_dir, "last.pt")
if os.path.exists(last):
    checkpoint = torch.load(last)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    if not args.skip_scheduler_state:
        scheduler.load_state_dict(checkpoint["scheduler"])
    start_epoch = checkpoint["epoch"] + 1
    print(f"=> resuming from {last} (epoch {checkpoint['epoch']})", flush=True)

os.makedirs(args.ckpt_dir, exist_ok=True)
for epoch in range(start_epoch, args.epochs):
    model.train()
    t0 = time.time()
    for i, (xb, yb) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        if i % 4 == 0:
            ms = (time.time() - t0) * 1000 / (i + 1)
            print(
                f"epoch {epoch} [{i + 1}/{len(loader)}] loss {loss.item():.4f} | {ms:.1f} ms/batch",
                flush=True,
            )
    tmp = last + ".tmp"
    torch.save(
        {
            "epoch": epoch,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
        },
        tmp,
    )
    os.replace(tmp, last)
    print(f"epoch {epoch} done, checkpoint saved", flush=True)
    time.sleep(args.epoch_sleep)

torch.save(model.state_dict(), args.save)
