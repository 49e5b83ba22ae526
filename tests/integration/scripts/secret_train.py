"""A small classifier trained the way many public scripts are: credentials in flags, env and configs.

It logs in to "the hub" with a token from the environment (printing it, as careless scripts do),
connects to a database, posts to a chat webhook, reads the YAML/JSON/TOML configs named on the
command line and a Hydra-style config group, logs its params, keeps a checkpoint in
`checkpoints/` and saves the model to the working directory.
"""

import argparse
import json
import os
import sys
import time
import tomllib

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("key", help="a positional API key")
parser.add_argument("--api-key", default="")
parser.add_argument("--token", default="")
parser.add_argument("--password", default="")
parser.add_argument("--passphrase", default="")
parser.add_argument("--db", default="")
parser.add_argument("--sentry-dsn", default="")
parser.add_argument("--webhook", default="")
parser.add_argument("--teams-hook", default="")
parser.add_argument("--storage", default="")
parser.add_argument("--bus", default="")
parser.add_argument("--sql", default="")
parser.add_argument("--auth-jwt", default="")
parser.add_argument("-k", default="")
parser.add_argument("--config", default="conf/train.yaml")
parser.add_argument("--extra", default="conf/service.json")
parser.add_argument("--toml", default="conf/tracking.toml")
parser.add_argument("-p", "--patience", type=int, default=3)
parser.add_argument("--pos-weight", type=float, default=1.0)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--save", default="model.pt")
args, overrides = parser.parse_known_args()  # Hydra-style `db.password=…` overrides

torch.manual_seed(1337)
print(f"logging in to the hub with token {os.environ.get('HF_TOKEN')}")
print(f"wandb login {os.environ.get('WANDB_API_KEY')} pass {os.environ.get('WANDB_PASS')}")
print(f"connecting to {os.environ.get('DATABASE_URL')} and {args.db}")
print(f"sentry: {os.environ.get('SENTRY_DSN')} / {args.sentry_dsn}")
print(f"storage: {os.environ.get('AZURE_STORAGE_CONNECTION_STRING')}")
print(f"posting to {os.environ.get('SLACK_WEBHOOK_URL')}, {args.webhook} and {args.teams_hook}")
print(f"bus {args.bus} sql {args.sql}", file=sys.stderr)
print(f"Authorization: Bearer {os.environ.get('SERVICE_JWT')}")
print(f"using key {args.key}, -k {args.k}, jwt {args.auth_jwt}", file=sys.stderr)
print("overrides:", " ".join(overrides))
with open(args.config) as f:
    print("config:", f.read().replace("\n", " | "))
with open(args.extra) as f:
    print("service:", json.load(f))
with open(args.toml, "rb") as f:
    print("tracking:", tomllib.load(f))
with open("conf/db/prod.yaml") as f:
    group = dict(line.split(": ", 1) for line in f.read().splitlines() if ": " in line)
print(f"db group {group['host']} password: {group['password']}")
settings = os.environ.get("EXTRA_SETTINGS", "")  # outside the project: repro never reads these files
if os.path.isdir(settings):  # (a container sees neither the variable nor the folder)
    with open(os.path.join(settings, "secret.txt")) as f:
        print(f"password: {f.read().strip()}")  # only the printed shape gives it away
    with open(os.path.join(settings, "jwt.txt")) as f:
        print(json.dumps({"access_token": f.read().strip()}))
try:
    import repro

    repro.log_params(
        api_key=args.api_key,
        hub_tkn=os.environ.get("HF_HUB_TKN"),
        db=args.db,
        note=f"run by {os.environ.get('HF_PAT')}",
        lr=0.1,
        patience=args.patience,
        dsn=os.environ.get("SENTRY_DSN"),
        credentials={"user": "trainer", "pass": args.password},
    )
    repro.log_metric(f"val_loss@{os.environ.get('GITHUB_TOKEN')}", 0.5, step=0)
except ImportError:
    pass
x = torch.randn(32, 4)
y = (x.sum(1) > 0).long()
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
os.makedirs("checkpoints", exist_ok=True)
for epoch in range(args.epochs):
    start = time.perf_counter()
    loss = nn.functional.cross_entropy(model(x), y, weight=torch.tensor([1.0, args.pos_weight]))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f} [{(time.perf_counter() - start) * 1000:.1f} ms/batch]")
    torch.save({"model": model.state_dict(), "epoch": epoch}, "checkpoints/last.pt")
torch.save(model.state_dict(), args.save)
