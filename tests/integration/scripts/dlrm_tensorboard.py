"""DLRM-style training on CPU (gloo) whose every rank logs its loss to TensorBoard in one `runs/`
directory, as `dlrm_s_pytorch.py --tensor-board-filename` does: one event file per rank, one tag."""

import argparse
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.tensorboard import SummaryWriter

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="data/points.csv")
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--tensor-board-filename", default="runs")
args = parser.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
rows = [line.split(",") for line in Path(args.data).read_text().split()]
x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
y = torch.tensor([int(c) for _, _, c in rows])
mine = slice(rank, None, world)
model = DistributedDataParallel(nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
writer = SummaryWriter(args.tensor_board_filename)
for step in range(args.steps):
    loss = nn.functional.cross_entropy(model(x[mine]), y[mine])
    opt.zero_grad()
    loss.backward()
    opt.step()
    writer.add_scalar("loss", loss.item(), step)
writer.close()
dist.destroy_process_group()
