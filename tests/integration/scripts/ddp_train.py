"""An unseeded DDP training on CPU (gloo): DistributedSampler seeded from `random`, dropout."""

import argparse
import os
import random
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--data", default="data/points.csv")
args = parser.parse_args()

if "RANK" in os.environ:
    dist.init_process_group("gloo")
else:  # one process without torchrun
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
rank, world = dist.get_rank(), dist.get_world_size()

rows = [line.split(",") for line in Path(args.data).read_text().split()]
x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
y = torch.tensor([int(c) for _, _, c in rows])

# Every rank must shuffle with the same seed: rank 0 draws it, the others receive it.
shared = [random.randint(0, 2**31 - 1)]
dist.broadcast_object_list(shared, src=0)
sampler = DistributedSampler(TensorDataset(x, y), num_replicas=world, rank=rank, shuffle=True, seed=shared[0])
loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, sampler=sampler, num_workers=0)

model = DistributedDataParallel(nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2)))
opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for xb, yb in loader:
        loss = nn.functional.cross_entropy(model(xb + torch.randn_like(xb) * 0.05), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank} epoch {epoch} loss {loss.item():.6f}", flush=True)
    print(f"rank {rank} epoch {epoch} done", file=sys.stderr, flush=True)
if rank == 0:
    os.makedirs("outputs", exist_ok=True)
    torch.save(model.module.state_dict(), "outputs/model.pt")
dist.destroy_process_group()
