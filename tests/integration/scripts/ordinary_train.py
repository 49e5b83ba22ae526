"""A training script with the flags public code uses, none of them a credential.

`-p` is patience, `-k` top-k, `--key-dim` an attention width, `--pad-token` a tokenizer's
padding, `--csv-img-key` a column name, `--use_auth_token` a switch; Hydra-style `key=value`
overrides tune the model. It resumes from `--resume` when the file exists, keeps a checkpoint
in `checkpoints/`, and saves the model in the working directory.
"""

import argparse
import os

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("-p", "--patience", type=int, default=5)
parser.add_argument("-k", "--top-k", type=int, default=1)
parser.add_argument("--pos-weight", type=float, default=1.0)
parser.add_argument("--key-dim", type=int, default=32)
parser.add_argument("--tokenizer", default="gpt2")
parser.add_argument("--pad-token", default="<pad>")
parser.add_argument("--csv-img-key", default="filepath")
parser.add_argument("--sort-key", default="length")
parser.add_argument("--max-new-tokens", type=int, default=10)
parser.add_argument("--use_auth_token", action="store_true")
parser.add_argument("--wandb-project", default=None)
parser.add_argument("--resume", default="")
args, overrides = parser.parse_known_args()
config = dict(o.lstrip("+").split("=", 1) for o in overrides)
lr = float(config.get("model.lr", 0.1))
epochs = int(config.get("trainer.max_epochs", 3))

try:
    import repro

    repro.log_params(patience=args.patience, tokenizer=args.tokenizer, wandb_project=args.wandb_project)
except ImportError:
    pass
torch.manual_seed(7)
x = torch.randn(64, args.key_dim // 8)
y = (x.sum(1) > 0).long()
model = nn.Sequential(nn.Linear(args.key_dim // 8, args.key_dim), nn.ReLU(), nn.Linear(args.key_dim, 2))
opt = torch.optim.SGD(model.parameters(), lr=lr)
start = 0
if args.resume and os.path.exists(args.resume):
    state = torch.load(args.resume)
    model.load_state_dict(state["model"])
    start = state["epoch"] + 1
best, waited = float("inf"), 0
os.makedirs("checkpoints", exist_ok=True)
for epoch in range(start, epochs):
    loss = nn.functional.cross_entropy(model(x), y, weight=torch.tensor([1.0, args.pos_weight]))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f} top-{args.top_k} pad={args.pad_token} tok={args.tokenizer}")
    waited = 0 if loss.item() < best else waited + 1
    best = min(best, loss.item())
    if waited >= args.patience:
        break
torch.save({"model": model.state_dict(), "epoch": epoch}, "checkpoints/last.pt")
torch.save(model.state_dict(), "model.pt")
