"""A DDP job whose rank 1 finds its data shard empty and stops; rank 0 waits for it at the rendezvous."""

import argparse
import os
import sys
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--shards", default="data/shards")
args = parser.parse_args()

rank = int(os.environ.get("RANK", "0"))
shard = Path(args.shards) / f"shard{rank}.csv"
if not shard.is_file() or not shard.read_text().strip():
    sys.exit(f"rank {rank}: data shard {shard} is empty")

import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
dist.barrier()
print(f"rank {rank} passed the barrier", flush=True)
dist.destroy_process_group()
