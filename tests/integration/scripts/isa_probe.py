"""A small MLP trained with DataLoader workers, in the shape of public training code: argparse, a
checkpoints folder, the model saved in the working directory. Each process (the main one and every
worker) prints the CPU kernel pins it was started with (the workers on stderr), so a test sees they
reach all of them."""

import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

PINS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR", "OPENBLAS_CORETYPE")


def pins():
    return " ".join(f"{name}={os.environ.get(name, '-')}" for name in PINS)


class Points(Dataset):
    def __init__(self, n=256):
        g = torch.Generator().manual_seed(3)
        self.x = torch.randn(n, 32, generator=g)
        self.y = (self.x.sum(dim=1) > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def report(worker_id):
    # One write of a whole line, on stderr: two workers starting together never share a line, and
    # stdout (compared by a replay) stays the same whichever worker starts first.
    os.write(2, f"worker {worker_id}: {pins()}\n".encode())


def main():
    parser = argparse.ArgumentParser(description="MLP on synthetic points")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--save", default="model.pt")
    parser.add_argument("--checkpoint-dir", default="checkpoints")
    args = parser.parse_args()
    torch.manual_seed(1337)
    print(f"main: {pins()} capability={torch.backends.cpu.get_cpu_capability()}", flush=True)
    loader = DataLoader(
        Points(), batch_size=32, shuffle=True, num_workers=args.workers, worker_init_fn=report
    )
    model = nn.Sequential(nn.Linear(32, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    for epoch in range(args.epochs):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.6f}", flush=True)
        torch.save(model.state_dict(), os.path.join(args.checkpoint_dir, f"epoch{epoch}.pt"))
    torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
