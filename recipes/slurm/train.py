"""Train a small classifier, one process or DDP (gloo) under torchrun; resume from the last checkpoint.

Every epoch each rank saves model, optimizer, epoch and its RNG states to
checkpoints/last.rank<r>.pt (written whole, then renamed); a start with a checkpoint
present continues from it. SIGUSR1 (Slurm's warning before a time limit) saves at the
end of the current batch and exits, so a requeued job continues.
"""

import argparse
import os
import random
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

parser = argparse.ArgumentParser(description="points classifier")
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--data", default="data/points.csv")
parser.add_argument("--save", default="model.pt")
parser.add_argument("--ckpt-dir", default="checkpoints")
parser.add_argument("--epoch-sleep", type=float, default=0.0, help="seconds of extra work per epoch")
parser.add_argument("--fail-rank", type=int, default=-1, help="this rank raises in its first epoch")
args = parser.parse_args()

torch.manual_seed(1337)
random.seed(1337)
distributed = "RANK" in os.environ
if distributed:
    dist.init_process_group("gloo")
rank = dist.get_rank() if distributed else 0
world = dist.get_world_size() if distributed else 1

stop = {"asked": False}


def on_usr1(signum, frame):
    stop["asked"] = True


signal.signal(signal.SIGUSR1, on_usr1)

rows = [line.split(",") for line in Path(args.data).read_text().split()]
x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
y = torch.tensor([int(c) for _, _, c in rows])
data = TensorDataset(x, y)
sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=7)
loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)

net = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))
model = nn.parallel.DistributedDataParallel(net) if distributed else net
opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

ckpt = Path(args.ckpt_dir) / f"last.rank{rank}.pt"
start = 0
if ckpt.exists():
    state = torch.load(ckpt, weights_only=False)
    net.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])
    random.setstate(state["python_rng"])
    start = state["epoch"] + 1
    print(f"rank {rank} resumed from {ckpt} at epoch {start}", file=sys.stderr, flush=True)


def save_checkpoint(epoch):
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    tmp = ckpt.with_suffix(".tmp")
    torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch,
                "torch_rng": torch.get_rng_state(), "python_rng": random.getstate()}, tmp)
    os.replace(tmp, ckpt)


for epoch in range(start, args.epochs):
    sampler.set_epoch(epoch)
    t0 = time.perf_counter()
    for i, (xb, yb) in enumerate(loader):
        if epoch == start and rank == args.fail_rank:
            raise RuntimeError(f"rank {rank}: bad batch {i}")
        loss = nn.functional.cross_entropy(model(xb + torch.randn_like(xb) * 0.05), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ms = (time.perf_counter() - t0) * 1000 / (i + 1)
        print(f"\repoch {epoch} [{i + 1}/{len(loader)}] loss {loss.item():.4f} {ms:.2f} ms/batch", end="",
              file=sys.stderr, flush=True)
    print(file=sys.stderr)
    time.sleep(args.epoch_sleep)
    print(f"rank {rank} epoch {epoch} loss {loss.item():.6f}", flush=True)
    save_checkpoint(epoch)
    if stop["asked"]:
        print(f"rank {rank} saved epoch {epoch} on SIGUSR1; stopping", file=sys.stderr, flush=True)
        sys.exit(0)

if rank == 0:
    Path(args.save).parent.mkdir(parents=True, exist_ok=True)
    torch.save(net.state_dict(), args.save)
if distributed:
    dist.destroy_process_group()
