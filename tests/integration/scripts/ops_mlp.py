"""A convolutional stem and an MLP of residual blocks trained on synthetic images: argparse,
the thread count from an environment variable, a block that can add a value drawn from OS
entropy, DataLoader workers, a checkpoints folder and the model saved into the working directory."""

import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Block(nn.Module):
    def __init__(self, width, noisy):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.noisy = noisy

    def forward(self, x):
        h = torch.relu(self.fc(x))
        if self.noisy:
            h = h + 1e-7 * int.from_bytes(os.urandom(2), "little")  # a tiny entropy-derived value
        return x + h


class MLP(nn.Module):
    def __init__(self, width, depth, noisy_block):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten()
        )
        self.embed = nn.Linear(8 * 4 * 4, width)
        self.blocks = nn.ModuleList(Block(width, i == noisy_block) for i in range(depth))
        self.head = nn.Linear(width, 4)

    def forward(self, x):
        x = self.embed(self.stem(x))
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main():
    parser = argparse.ArgumentParser(description="residual MLP")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--noisy-block", type=int, default=-1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--save", default="model.pt")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("TRAIN_THREADS", "1")))
    torch.manual_seed(1234)
    model = MLP(args.width, 4, args.noisy_block)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = torch.randn(args.batch_size * 8, 1, 24, 24)
    labels = torch.randint(0, 4, (len(data),))
    loader = DataLoader(TensorDataset(data, labels), batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers)  # fmt: skip
    os.makedirs("checkpoints", exist_ok=True)
    step = 0
    while step < args.steps:
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(f"step {step} loss {loss.item():.6f}")
            step += 1
            if step == args.steps:
                break
    torch.save({"model": model.state_dict(), "step": args.steps}, "checkpoints/last.pt")
    torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
