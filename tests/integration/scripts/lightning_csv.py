"""A training loop that writes what Lightning's CSVLogger writes: lightning_logs/version_0/metrics.csv
(epoch, step, one column per logged name, empty cells where a row has no value) and hparams.yaml; no
repro API."""

import argparse
import csv
import os
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args()
torch.manual_seed(42)
x = torch.randn(128, 4)
y = (x[:, 0] > 0).long()
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=args.lr)
log_dir = os.path.join("lightning_logs", "version_0")
os.makedirs(log_dir, exist_ok=True)
with open(os.path.join(log_dir, "hparams.yaml"), "w") as f:
    f.write(f"lr: {args.lr}\nepochs: {args.epochs}\n")
rows = []
step = 0
for epoch in range(args.epochs):
    start = time.time()
    for i in range(0, 96, 16):
        loss = torch.nn.functional.cross_entropy(model(x[i : i + 16]), y[i : i + 16])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 2 == 1:
            rows.append({"epoch": epoch, "step": step, "train_loss": f"{loss.item():.6f}"})
        step += 1
    with torch.no_grad():
        val = torch.nn.functional.cross_entropy(model(x[96:]), y[96:]).item()
        acc = (model(x[96:]).argmax(1) == y[96:]).float().mean().item()
    rows.append(
        {
            "epoch": epoch,
            "step": step - 1,
            "val_loss": f"{val:.6f}",
            "val_acc": f"{acc:.4f}",
            "epoch_time": f"{time.time() - start:.4f}",
        }
    )
fields = ["epoch", "epoch_time", "step", "train_loss", "val_acc", "val_loss"]
with open(os.path.join(log_dir, "metrics.csv"), "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=fields)
    writer.writeheader()
    writer.writerows(rows)
torch.save(model.state_dict(), "model.pt")
