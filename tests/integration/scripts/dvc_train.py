"""Train a small classifier on CSV shards in a data folder (the folder DVC tracks).

The shape of public training code: argparse flags, a Dataset over every shard of ``--data``,
DataLoader workers with a seeded shuffle, a progress line per epoch, the model saved in the working
directory.
"""

import argparse
import glob
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Shards(Dataset):
    def __init__(self, root):
        rows = []
        for path in sorted(glob.glob(os.path.join(root, "**", "*.csv"), recursive=True)):
            with open(path) as f:
                rows += [[float(v) for v in line.split(",")] for line in f if line.strip()]
        if not rows:
            raise SystemExit(f"no data under {root}")
        data = torch.tensor(rows)
        self.x, self.y = data[:, :2], data[:, 2].long()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def main():
    parser = argparse.ArgumentParser(description="classify points")
    parser.add_argument("--data", default="data")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    loader = DataLoader(
        Shards(args.data),
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        generator=torch.Generator().manual_seed(args.seed),
    )
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        total = 0.0
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(y)
        steps = len(loader)
        print(f"epoch {epoch}: 100%|##########| {steps}/{steps} loss={total / len(loader.dataset):.6f}")
    torch.save(model.state_dict(), "model.pt")


if __name__ == "__main__":
    main()
