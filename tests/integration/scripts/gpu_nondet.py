"""A CNN head with adaptive average pooling on CUDA: its backward has no deterministic CUDA kernel,
so a pinned mode refuses it unless the run allows nondeterministic ops."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
args = parser.parse_args()

device = torch.device("cuda")
data = torch.Generator().manual_seed(0)
x = torch.randn(256, 3, 32, 32, generator=data).to(device)
y = torch.randint(0, 10, (256,), generator=data).to(device)
model = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d((5, 5)), nn.Flatten(), nn.Linear(800, 10)
).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for _ in range(args.steps):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"final loss {loss.item():.6f}")
torch.save(model.state_dict(), "model.pt")
