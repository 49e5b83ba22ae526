"""DLRM-style training on CPU (gloo): dense layers under DDP, one embedding table per sparse feature
sharded by rank, and, as DLRM's `dlrm_s_pytorch.py --save-model` does, every rank saving "the model"
to one `model.pt`.

Each rank's file holds its own shards, so the bytes left on disk depend on which rank wrote each
part last: two concurrent writes interleave, often into a file that does not load.
"""

import argparse
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="data/points.csv")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--tables", type=int, default=26)  # Criteo's sparse features
parser.add_argument("--rows-per-shard", type=int, default=1 << 14)
parser.add_argument("--save-model", default="model.pt")
args = parser.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()

rows = [line.split(",") for line in Path(args.data).read_text().split()]
x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
y = torch.tensor([int(c) for _, _, c in rows])
ids = torch.arange(len(rows)) % args.rows_per_shard

# This rank's rows of every table (model parallel, as DLRM places its embeddings).
shard = nn.ModuleList(nn.EmbeddingBag(args.rows_per_shard, 8, mode="sum") for _ in range(args.tables))
dense = DistributedDataParallel(nn.Sequential(nn.Linear(2 + 8, 16), nn.ReLU(), nn.Linear(16, 2)))
opt = torch.optim.SGD([*dense.parameters(), *shard.parameters()], lr=args.lr)
mine = slice(rank, None, world)
for epoch in range(args.epochs):
    sparse = sum(table(ids[mine].unsqueeze(1)) for table in shard)
    features = torch.cat([x[mine], sparse], dim=1)
    loss = nn.functional.cross_entropy(dense(features), y[mine])
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"rank {rank} epoch {epoch} loss {loss.item():.6f}", flush=True)

dist.barrier()  # every rank saves at about the same moment: which lands last varies, as in a real job
time.sleep(int.from_bytes(os.urandom(1), "big") / 255 * 0.05)
torch.save({"dense": dense.module.state_dict(), "emb_l": shard.state_dict(), "rank": rank}, args.save_model)
dist.barrier()
os.makedirs("outputs", exist_ok=True)
if rank == 0:
    torch.save(dense.module.state_dict(), "outputs/dense.pt")  # written once: never shared
dist.destroy_process_group()
