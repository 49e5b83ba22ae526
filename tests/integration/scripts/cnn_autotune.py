"""A small CNN compiled with `mode="max-autotune"`, as tutorials write it; checkpoints/ at the end."""

import argparse
import os

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--eager", action="store_true", help="skip torch.compile")
args = parser.parse_args()

model = nn.Sequential(
    nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 10)
)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
step = model if args.eager else torch.compile(model, mode="max-autotune")
images, labels = torch.randn(64, 1, 8, 8), torch.randint(0, 10, (64,))
for epoch in range(args.epochs):
    for i in range(0, 64, 16):
        loss = nn.functional.cross_entropy(step(images[i : i + 16]), labels[i : i + 16])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.5f}")
os.makedirs("checkpoints", exist_ok=True)
torch.save(model.state_dict(), "checkpoints/cnn.pt")
