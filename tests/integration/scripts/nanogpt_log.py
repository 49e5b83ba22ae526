"""nanoGPT-style training: `iter N: loss X, time Yms, mfu Z%` every 10 iterations and
`step N: train loss X, val loss Y` at evaluations; no repro API."""

import argparse
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=40)
parser.add_argument("--eval_interval", type=int, default=20)
parser.add_argument("--lr", type=float, default=0.05)
args = parser.parse_args()
torch.manual_seed(1337)
x = torch.randn(256, 8)
y = (x.sum(1, keepdim=True) > 0).float()
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
print(f"number of parameters: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M")
for it in range(args.max_iters + 1):
    if it % args.eval_interval == 0:
        with torch.no_grad():
            tl = torch.nn.functional.binary_cross_entropy_with_logits(model(x[:200]), y[:200]).item()
            vl = torch.nn.functional.binary_cross_entropy_with_logits(model(x[200:]), y[200:]).item()
        print(f"step {it}: train loss {tl:.4f}, val loss {vl:.4f}")
    t0 = time.time()
    idx = torch.randint(0, 200, (32,))
    loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x[idx]), y[idx])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if it % 10 == 0:
        print(f"iter {it}: loss {loss.item():.4f}, time {(time.time() - t0) * 1000:.2f}ms, mfu {-100.0:.2f}%")
torch.save(model.state_dict(), "ckpt.pt")
