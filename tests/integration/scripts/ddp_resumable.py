"""DDP on CPU (gloo): rank 0 checkpoints every epoch, every rank loads the checkpoint when it exists."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--batch-size", type=int, default=4)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--data", default="data/points.csv")
parser.add_argument("--resume", default="checkpoints/ddp.pt")
parser.add_argument("--save", default="model.pt")
parser.add_argument("--epoch-sleep", type=float, default=0.0, help="seconds of extra work per epoch")
args = parser.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()

rows = [line.split(",") for line in open(args.data).read().split()]
dataset = TensorDataset(
    torch.tensor([[float(a), float(b)] for a, b, _ in rows]), torch.tensor([int(c) for _, _, c in rows])
)
sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=17)
loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

model = DistributedDataParallel(nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2)))
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.8)

start = 0
if os.path.exists(args.resume):
    state = torch.load(args.resume, map_location="cpu")
    model.module.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    start = state["epoch"] + 1
    print(f"rank {rank}: resumed at epoch {start}", flush=True)

for epoch in range(start, args.epochs):
    sampler.set_epoch(epoch)
    for xb, yb in loader:
        loss = nn.functional.cross_entropy(model(xb + torch.randn_like(xb) * 0.05), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    scheduler.step()
    print(f"rank {rank} epoch {epoch} loss {loss.item():.6f}", flush=True)
    if rank == 0:
        os.makedirs(os.path.dirname(args.resume), exist_ok=True)
        torch.save(
            {
                "epoch": epoch,
                "model": model.module.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
            },
            args.resume,
        )
    dist.barrier()
    time.sleep(args.epoch_sleep)

if rank == 0:
    torch.save(model.module.state_dict(), args.save)
dist.destroy_process_group()
