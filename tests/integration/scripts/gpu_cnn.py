"""A small CNN on fixed synthetic 3x32x32 images, fed by a DataLoader with worker processes; seeds
nothing itself (repro does). Average pooling only: adaptive pooling's CUDA backward has no
deterministic kernel. `--timing FILE` writes the timed steps' throughput there (outside the project)."""

import argparse
import json
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--timing", default=None)
args = parser.parse_args()

device = torch.device("cuda")
data = torch.Generator().manual_seed(0)  # the data is fixed; init, shuffling and dropout are repro's
images = torch.randn(2048, 3, 32, 32, generator=data)
labels = torch.randint(0, 10, (2048,), generator=data)
loader = DataLoader(
    TensorDataset(images, labels),
    batch_size=args.batch_size,
    shuffle=True,
    num_workers=args.workers,
    persistent_workers=args.workers > 0,
)

model = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1),
    nn.BatchNorm2d(32),
    nn.ReLU(),
    nn.AvgPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1),
    nn.BatchNorm2d(64),
    nn.ReLU(),
    nn.AvgPool2d(2),
    nn.Conv2d(64, 128, 3, padding=1),
    nn.ReLU(),
    nn.AvgPool2d(8),
    nn.Flatten(),
    nn.Dropout(0.2),
    nn.Linear(128, 10),
).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
seen, start = 0, None
for epoch in range(args.epochs):
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if start is None:  # the first step (cuDNN set-up) is left out of the timing
            torch.cuda.synchronize()
            start = time.perf_counter()
        else:
            seen += len(y)
    print(f"epoch {epoch} loss {loss.item():.6f}")
torch.cuda.synchronize()
if args.timing:
    with open(args.timing, "w") as f:
        json.dump(
            {"samples_per_s": seen / (time.perf_counter() - start), "gpu": torch.cuda.get_device_name(0)}, f
        )
torch.save({k: v.cpu() for k, v in model.state_dict().items()}, "model.pt")
