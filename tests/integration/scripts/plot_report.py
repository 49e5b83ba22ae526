"""Train a small regression, then write what such repositories write next to the model: a loss curve
(PDF, PNG, SVG), a report PDF stamped with today's date, gzip'd predictions and a zip of the run."""

import argparse
import gzip
import json
import zipfile
from datetime import datetime
from pathlib import Path

import matplotlib
import torch
from torch import nn

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--out", default="figures")
    args = parser.parse_args()

    x = torch.linspace(-1, 1, 64).unsqueeze(1)
    y = 3 * x + 0.5 + 0.1 * torch.randn_like(x)
    model = nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    losses = []
    for epoch in range(args.epochs):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        print(f"epoch {epoch} loss {loss.item():.6f}")
    torch.save(model.state_dict(), "model.pt")

    out = Path(args.out)
    out.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot(losses, label="train")
    ax.set_xlabel("epoch")
    ax.set_ylabel("mse")
    ax.legend()
    for ext in ("pdf", "png", "svg"):
        fig.savefig(out / f"loss.{ext}")
    fig.savefig(out / "report.pdf", metadata={"CreationDate": datetime.now(), "Title": "training report"})

    with gzip.open(out / "predictions.csv.gz", "wt") as f:
        f.write("x,prediction\n")
        for xi, pi in zip(x.squeeze(1).tolist(), model(x).squeeze(1).tolist(), strict=True):
            f.write(f"{xi:.6f},{pi:.6f}\n")
    with zipfile.ZipFile("run.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("metrics.json", json.dumps({"final_loss": losses[-1]}))
        z.write("model.pt")
    print(f"saved model.pt, run.zip and {len(list(out.iterdir()))} figures")


if __name__ == "__main__":
    main()
