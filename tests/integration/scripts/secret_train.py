"""A small classifier trained the way many public scripts are: credentials in flags and env.

It logs in to "the hub" with a token from the environment (printing it, as careless
scripts do), reads a YAML config named on the command line, logs its params, and saves
the model to the working directory.
"""

import argparse
import os
import sys
import time

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("key", help="a positional API key")
parser.add_argument("--pw", default="")
parser.add_argument("--hf-tok", default="")
parser.add_argument("-p", "--password", default="")
parser.add_argument("--passphrase", default="")
parser.add_argument("--api-key", default="")
parser.add_argument("--token", default="")
parser.add_argument("--db", default="")
parser.add_argument("--config", default="config.yaml")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--save", default="model.pt")
args = parser.parse_args()

torch.manual_seed(1337)
print(f"logging in to the hub with token {os.environ.get('HF_TOKEN')}")
print(f"wandb login {os.environ.get('WANDB_API_KEY')} pass {os.environ.get('WANDB_PASS')}")
print(f"using key {args.key} and db {args.db}", file=sys.stderr)
config = open(args.config).read()
print("config:", config.replace("\n", " | "))
try:
    import repro

    repro.log_params(api_key=args.api_key, hub_tkn=os.environ.get("HF_HUB_TKN"), db=args.db,
                     note=f"run by {os.environ.get('HF_PAT')}", lr=0.1)
except ImportError:
    pass
x = torch.randn(32, 4)
y = (x.sum(1) > 0).long()
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(args.epochs):
    start = time.perf_counter()
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f} [{(time.perf_counter() - start) * 1000:.1f} ms/batch]")
torch.save(model.state_dict(), args.save)
