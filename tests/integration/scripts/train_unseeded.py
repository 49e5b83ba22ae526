"""An unseeded real training script: DataLoader workers with random augmentation, dropout."""

import argparse
import os
import random
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Points(Dataset):
    def __init__(self, path: Path) -> None:
        rows = [line.split(",") for line in path.read_text().split()]
        self.x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
        self.y = torch.tensor([int(c) for _, _, c in rows])

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i] + torch.randn(2) * 0.1 + random.uniform(-0.05, 0.05), self.y[i]


parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--data", default="data/points.csv")
args = parser.parse_args()

loader = DataLoader(
    Points(Path(args.data)), batch_size=args.batch_size, shuffle=True, num_workers=args.workers
)
model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))
opt = torch.optim.Adam(model.parameters(), lr=args.lr)
step = 0
try:
    import repro
except ImportError:
    repro = None
for epoch in range(args.epochs):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if repro is not None:
            repro.log_metric("loss", loss.item(), step)
        step += 1
    print(f"epoch {epoch} loss {loss.item():.6f}")
os.makedirs("outputs", exist_ok=True)
torch.save(model.state_dict(), "outputs/model.pt")
Path("outputs/summary.txt").write_text(f"steps {step}\nfinal {loss.item():.8f}\n")
