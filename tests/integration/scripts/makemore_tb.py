"""makemore-style training: a SummaryWriter in --work-dir, `Loss/train` every step and `Loss/test`
at evaluations, the model saved there; no repro API."""

import argparse
import os
import time

import torch
from torch.utils.tensorboard import SummaryWriter

parser = argparse.ArgumentParser(description="Make More")
parser.add_argument("--work-dir", "-o", type=str, default="out", help="output working directory")
parser.add_argument("--max-steps", type=int, default=30)
parser.add_argument("--learning-rate", "-l", type=float, default=5e-3)
args = parser.parse_args()
torch.manual_seed(3407)
os.makedirs(args.work_dir, exist_ok=True)
writer = SummaryWriter(log_dir=args.work_dir)
words = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "amelia", "harper"]
chars = sorted(set("".join(words)))
stoi = {c: i + 1 for i, c in enumerate(chars)}
xs, ys = [], []
for w in words:
    seq = [0] + [stoi[c] for c in w] + [0]
    xs += seq[:-1]
    ys += seq[1:]
X, Y = torch.tensor(xs), torch.tensor(ys)
model = torch.nn.Sequential(torch.nn.Embedding(len(chars) + 1, 16), torch.nn.Linear(16, len(chars) + 1))
opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.01)
for step in range(args.max_steps):
    t0 = time.time()
    loss = torch.nn.functional.cross_entropy(model(X), Y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    t1 = time.time()
    if step % 10 == 0:
        print(f"step {step} | loss {loss.item():.4f} | step time {(t1 - t0) * 1000:.2f}ms")
    writer.add_scalar("Loss/train", loss.item(), step)
    if step > 0 and step % 10 == 0:
        with torch.no_grad():
            test_loss = torch.nn.functional.cross_entropy(model(X[:20]), Y[:20]).item()
        writer.add_scalar("Loss/test", test_loss, step)
        writer.flush()
        torch.save(model.state_dict(), os.path.join(args.work_dir, "model.pt"))
writer.close()
