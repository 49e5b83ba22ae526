"""Full-batch linear regression with plain SGD: nothing random after initialisation. Checkpoints after
every step to checkpoints/last.pt and continues from it when present."""

import argparse
import os

import torch

parser = argparse.ArgumentParser(description="full-batch regression")
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--save", default="outputs/model.pt")
args = parser.parse_args()

torch.manual_seed(0)
x = torch.linspace(-1, 1, 64).unsqueeze(1)
y = 3 * x + 1
model = torch.nn.Linear(1, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
step = 0
if os.path.exists("checkpoints/last.pt"):
    state = torch.load("checkpoints/last.pt")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    step = state["step"]
    print(f"=> resuming from checkpoints/last.pt at step {step}", flush=True)
os.makedirs("checkpoints", exist_ok=True)
while step < args.steps:
    loss = ((model(x) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    step += 1
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
               "checkpoints/last.pt")  # fmt: skip
os.makedirs(os.path.dirname(args.save), exist_ok=True)
torch.save(model.state_dict(), args.save)
