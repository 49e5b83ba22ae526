"""A two-rank gloo job whose rank 1 fails after the group is up; rank 0 waits at a barrier."""

import sys

import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
print(f"rank {rank} started", flush=True)
if rank == 1:
    sys.stderr.write("rank 1: the shard is empty\n")
    raise RuntimeError("boom: rank 1 lost its data shard")
dist.barrier()
print("rank 0 passed the barrier", flush=True)
