"""Training that reads a data folder, one sample per file, in the shape of public image-folder code:
argparse, a Dataset over the files of a class-per-folder tree, DataLoader workers, tqdm-style progress
lines, checkpoints in a folder and the model saved in the working directory."""

import argparse
import os
import sys
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class FolderDataset(Dataset):
    """data/<split>/<class>/<n>.txt: two numbers per file, the class from the folder name."""

    def __init__(self, root: Path) -> None:
        self.classes = sorted(p.name for p in root.iterdir() if p.is_dir())
        self.samples = [(f, i) for i, c in enumerate(self.classes) for f in sorted((root / c).glob("*.txt"))]
        if not self.samples:
            sys.exit(f"no samples under {root}")

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        path, label = self.samples[i]
        a, b = (float(v) for v in path.read_text().split())
        return torch.tensor([a, b]), label


parser = argparse.ArgumentParser(description="train a tiny classifier on a folder of samples")
parser.add_argument("--data-dir", default="data/train")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.05)
args = parser.parse_args()

dataset = FolderDataset(Path(args.data_dir))
loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, len(dataset.classes)))
opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
os.makedirs("checkpoints", exist_ok=True)
for epoch in range(args.epochs):
    total = 0.0
    for i, (x, y) in enumerate(loader, 1):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item()
        print(f"\rEpoch {epoch}: {i}/{len(loader)} [loss={loss.item():.4f}]", end="", file=sys.stderr)
    print(f"\nepoch {epoch} mean loss {total / len(loader):.6f}")
    torch.save({"epoch": epoch, "model": model.state_dict()}, f"checkpoints/epoch{epoch}.pt")
torch.save(model.state_dict(), "model.pt")
