"""Trains deterministically, except that at step 3 OS entropy nudges one parameter."""

import os

import torch
from torch import nn

x = torch.randn(64, 4)
y = (x.sum(dim=1) > 0).long()
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    if step == 3:
        with torch.no_grad():
            model[2].bias += int.from_bytes(os.urandom(2), "little") * 1e-6
    opt.step()
os.makedirs("outputs", exist_ok=True)
torch.save(model.state_dict(), "outputs/model.pt")
