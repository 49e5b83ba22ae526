"""A small CNN trained on synthetic images with torch's intra-op threads left to the launcher:
argparse, a self-seeded script, the model saved into the working directory."""

import argparse

import torch
from torch import nn


def main():
    parser = argparse.ArgumentParser(description="tiny CNN")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--save", default="model.pt")
    args = parser.parse_args()
    torch.manual_seed(1337)
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 2),
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    images = torch.randn(args.batch_size * 4, 1, 24, 24)
    labels = (images.mean(dim=(1, 2, 3)) > 0).long()
    for step in range(args.steps):
        i = torch.randint(0, len(images), (args.batch_size,))
        loss = nn.functional.cross_entropy(model(images[i]), labels[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 5 == 0:
            print(f"step {step} loss {loss.item():.5f}")
    print(f"torch threads {torch.get_num_threads()}")
    torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
