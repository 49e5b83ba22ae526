"""A training script tracked with Weights & Biases, DataLoader workers with random augmentation."""

import argparse
import time
from pathlib import Path

import torch
import wandb
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Points(Dataset):
    def __init__(self, path: str) -> None:
        rows = [line.split(",") for line in Path(path).read_text().split()]
        self.x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
        self.y = torch.tensor([int(c) for _, _, c in rows])

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i] + 0.05 * torch.randn(2), self.y[i]  # jitter: random augmentation


parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--workers", type=int, default=1)
parser.add_argument("--save", default="model.pt")
args = parser.parse_args()

run = wandb.init(project="tiny", config=vars(args))
loader = DataLoader(Points("data/points.csv"), batch_size=16, shuffle=True, num_workers=args.workers)
model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
for epoch in range(args.epochs):
    start = time.perf_counter()
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    run.log({"loss": loss.item(), "epoch": epoch})
    ms = 1000 * (time.perf_counter() - start) / len(loader)
    print(f"epoch {epoch} loss {loss.item():.6f} {ms:.2f} ms/batch")
torch.save(model.state_dict(), args.save)
run.finish()
