"""A small training script shaped like a Hugging Face fine-tune: argparse, a model saved in the
working directory, its arguments saved next to it (`training_args.bin`, a pickle) and a config that
keeps the hub token, as `Trainer.save_model` and `TrainingArguments` do; the run ends in an error
whose traceback shows the login line."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pickle
from pathlib import Path

import auth
import settings
import torch

# Read from the environment, not a secret in itself (an AWS credentials file has this shape at
# the start of a line, with a value).
aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "")  # fmt: skip


@dataclasses.dataclass
class TrainingArguments:
    output_dir: str
    learning_rate: float
    hub_token: str
    push_to_hub: bool = False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    x, y = torch.randn(32, 4), torch.randint(0, 2, (32,))
    for epoch in range(args.epochs):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f} app {settings.APP_NAME}", flush=True)
    out = Path("outputs")
    out.mkdir(exist_ok=True)
    torch.save(model.state_dict(), out / "model.pt")
    hub = os.environ["HUB_TOKEN_FOR_TEST"]
    (out / "config.json").write_text(json.dumps({"hidden": 4, "labels": 2, "hub_token": hub}, indent=2))
    targs = TrainingArguments("outputs", args.lr, os.environ["HUB_TOKEN_2_FOR_TEST"])
    (out / "training_args.bin").write_bytes(pickle.dumps(targs))
    auth.login()


if __name__ == "__main__":
    main()
