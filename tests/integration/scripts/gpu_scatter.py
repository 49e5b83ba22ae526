"""A bag-of-embeddings classifier that pools with index_add_ and counts with scatter_add_ on CUDA:
both have a deterministic CUDA path, which gpu mode must select."""

import argparse
import os

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
args = parser.parse_args()

device = torch.device("cuda")
data = torch.Generator().manual_seed(0)
tokens = torch.randint(0, 5000, (4096,), generator=data).to(device)
bags = torch.sort(torch.randint(0, 256, (4096,), generator=data)).values.to(device)  # token i -> bag
labels = torch.randint(0, 4, (256,), generator=data).to(device)


class BagModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(5000, 64)
        self.head = nn.Linear(64, 4)

    def forward(self, tok: torch.Tensor, bag: torch.Tensor) -> torch.Tensor:
        pooled = torch.zeros(256, 64, device=tok.device).index_add_(0, bag, self.emb(tok))
        counts = torch.zeros(256, device=tok.device).scatter_add_(
            0, bag, torch.ones_like(bag, dtype=torch.float)
        )
        return self.head(pooled / counts.clamp(min=1).unsqueeze(1))


model = BagModel().to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(args.steps):
    keep = torch.rand(4096, device=device) > 0.1  # token dropout, from repro's seed
    loss = nn.functional.cross_entropy(model(tokens[keep], bags[keep]), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 20 == 0:
        print(f"step {step} loss {loss.item():.6f}")
os.makedirs("checkpoints", exist_ok=True)
torch.save(model.state_dict(), "checkpoints/bag.pt")
