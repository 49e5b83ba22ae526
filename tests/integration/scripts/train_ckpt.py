"""A tiny classifier trained the way public examples do it: argparse flags, a fixed seed,
checkpoints in their own folder, tqdm-style progress with ms/batch, the model saved to the
working directory."""

import argparse
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description="toy classifier")
parser.add_argument("--data", default="data/points.csv")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--workers", type=int, default=1)
parser.add_argument("--save", default="model.pt")
parser.add_argument("--checkpoint-dir", default="checkpoints")
args = parser.parse_args()

torch.manual_seed(1337)
rows = [line.split(",") for line in open(args.data).read().split()]
x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
y = torch.tensor([int(c) for _, _, c in rows])
loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Dropout(0.1), nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
os.makedirs(args.checkpoint_dir, exist_ok=True)
for epoch in range(args.epochs):
    start, total, batches = time.time(), 0.0, 0
    for xb, yb in loader:
        loss = nn.functional.cross_entropy(model(xb + 0.05 * torch.randn_like(xb)), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total, batches = total + loss.item(), batches + 1
    ms = (time.time() - start) * 1000 / batches
    print(
        f"epoch {epoch + 1}/{args.epochs} | {batches}/{len(loader)} batches | {ms:.2f} ms/batch "
        f"| loss {total / batches:.6f}"
    )
    state = {"epoch": epoch, "model": model.state_dict()}
    torch.save(state, os.path.join(args.checkpoint_dir, f"epoch{epoch}.pt"))
torch.save(model.state_dict(), args.save)
