"""A tiny real training run: an MLP on synthetic data, with DataLoader workers,
random augmentation and dropout. It seeds nothing itself: repro does."""

import argparse
import random
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import repro


class Points(Dataset):
    def __init__(self, path: Path) -> None:
        rows = [line.split(",") for line in path.read_text().split()]
        self.x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
        self.y = torch.tensor([int(c) for _, _, c in rows])

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        jitter = torch.randn(2) * 0.05 + random.uniform(-0.01, 0.01)  # augmentation in the worker
        return self.x[i] + jitter, self.y[i]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    data = Points(Path("data/points.csv"))
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    model = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    step = 0
    for epoch in range(args.epochs):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            repro.log_metric("loss", loss.item(), step)
            step += 1
        print(f"epoch {epoch} loss {loss.item():.6f}")
    out = repro.output_dir()
    torch.save(model.state_dict(), out / "model.pt")
    print(f"saved {out / 'model.pt'}")


if __name__ == "__main__":
    main()
