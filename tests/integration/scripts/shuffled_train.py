"""A training script whose shuffle comes from its own generator: fixed by `--seed`, or from OS entropy.

DataLoader workers with random augmentation; `--finetune bias` trains the classifier's bias only
(BitFit), so two runs at other learning rates differ in that one tensor. Saves `model.pt` in the
working directory.
"""

import argparse
import os
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
        return self.x[i] + torch.randn(2) * 0.1, self.y[i]


parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--seed", default="entropy", help="the shuffle's seed, or 'entropy'")
parser.add_argument("--finetune", choices=["all", "bias"], default="all")
parser.add_argument("--data", default="data/points.csv")
args = parser.parse_args()

seed = int.from_bytes(os.urandom(4)) if args.seed == "entropy" else int(args.seed)
loader = DataLoader(
    Points(Path(args.data)),
    batch_size=16,
    shuffle=True,
    num_workers=args.workers,
    generator=torch.Generator().manual_seed(seed),
)
model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
if args.finetune == "bias":
    for name, p in model.named_parameters():
        p.requires_grad = name == "2.bias"
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=args.lr)
for epoch in range(args.epochs):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
torch.save(model.state_dict(), "model.pt")
