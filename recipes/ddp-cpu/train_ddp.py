"""Data-parallel training on the CPU (gloo): an MLP on the points, two or more ranks.

It seeds nothing itself: repro gives every rank its own seed (the run's master seed
plus the rank). Rank 0 draws the DistributedSampler's shuffle seed from `random` and
shares it, so every rank shuffles alike; dropout and input noise differ per rank.
"""

import argparse
import random
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import repro


def load(path: Path) -> TensorDataset:
    rows = [line.split(",") for line in path.read_text().split()]
    x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
    y = torch.tensor([int(c) for _, _, c in rows])
    return TensorDataset(x, y)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)  # part of the result: keep it fixed
    args = parser.parse_args()

    dist.init_process_group("gloo")  # torchrun sets RANK, WORLD_SIZE, MASTER_ADDR/PORT
    rank, world = dist.get_rank(), dist.get_world_size()

    data = load(Path("data/points.csv"))
    shuffle_seed = [random.randint(0, 2**31 - 1)]
    dist.broadcast_object_list(shuffle_seed, src=0)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=shuffle_seed[0])
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler, num_workers=0)

    net = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 2))
    model = DistributedDataParallel(net, bucket_cap_mb=args.bucket_cap_mb)  # rank 0's weights everywhere
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x + torch.randn_like(x) * 0.05), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if rank == 0:
                repro.log_metric("loss", loss.item(), step)
            step += 1
        print(f"rank {rank}/{world} epoch {epoch} loss {loss.item():.6f}", flush=True)
    if rank == 0:
        out = repro.output_dir()
        torch.save(net.state_dict(), out / "model.pt")
        print(f"saved {out / 'model.pt'}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
