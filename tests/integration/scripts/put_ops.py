"""A scatter-style update through Tensor.put_(accumulate=False), which has no deterministic CPU
kernel: in the DataLoader workers (per sample) and in the training loop (per step)."""

import argparse
import os

import torch
import torch.distributed  # noqa: F401  (imported by most DDP scripts; --trace walks its objects)
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Scattered(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        x = torch.zeros(4)
        x.put_(torch.tensor([i % 4]), torch.tensor([1.0]), accumulate=False)
        return x, torch.tensor(i % 2)


parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--save", default="head.pt")
args = parser.parse_args()

torch.manual_seed(0)
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
bank = torch.zeros(16)
for step, (x, y) in enumerate(DataLoader(Scattered(), batch_size=2, num_workers=args.workers)):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    bank.put_(torch.tensor([step]), loss.detach().reshape(1), accumulate=False)
if int(os.environ.get("RANK", "0")) == 0:
    torch.save({"model": model.state_dict(), "bank": bank}, args.save)
print("steps", step + 1)
