"""A training script tracked with MLflow, seeding itself, saving its model.

The store is MLflow's to choose (``MLFLOW_TRACKING_URI``, else MLflow 3's default ``sqlite:///mlflow.db``)
unless ``--tracking-uri`` sets one in the script, as many scripts do.
"""

import argparse
import time
from pathlib import Path

import mlflow
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--data", default="data/points.csv")
parser.add_argument("--save", default="outputs/model.pt")
parser.add_argument("--tracking-uri", default=None)
args = parser.parse_args()

torch.manual_seed(1337)
rows = [line.split(",") for line in Path(args.data).read_text().split()]
x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
y = torch.tensor([int(c) for _, _, c in rows])
model = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
opt = torch.optim.Adam(model.parameters(), lr=args.lr)

if args.tracking_uri:
    mlflow.set_tracking_uri(args.tracking_uri)
mlflow.set_experiment("tiny")
with mlflow.start_run(run_name="tiny-mlp"):
    mlflow.log_params(vars(args))
    for epoch in range(args.epochs):
        start = time.perf_counter()
        for i in range(0, len(x), 16):
            loss = nn.functional.cross_entropy(model(x[i : i + 16]), y[i : i + 16])
            opt.zero_grad()
            loss.backward()
            opt.step()
        mlflow.log_metric("loss", loss.item(), step=epoch)
        print(f"epoch {epoch} loss {loss.item():.6f} {1000 * (time.perf_counter() - start):.1f} ms/batch")
    Path(args.save).parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), args.save)
