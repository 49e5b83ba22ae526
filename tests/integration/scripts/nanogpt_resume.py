"""A character model trained as nanoGPT's train.py trains: `--init_from scratch|resume` (default scratch),
a checkpoint `out/ckpt.pt` every `--eval_interval` iterations, `iter N: loss X` lines. Resuming needs the
flag: with the default, a rerun starts again from iter 0, whatever `out/` holds."""

import argparse
import os
import time

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--init_from", default="scratch", choices=["scratch", "resume"])
parser.add_argument("--out_dir", default="out")
parser.add_argument("--max_iters", type=int, default=60)
parser.add_argument("--eval_interval", type=int, default=10)
parser.add_argument("--iter_sleep", type=float, default=0.0, help="seconds of extra work per iteration")
args = parser.parse_args()

text = "first citizen: before we proceed any further, hear me speak. " * 8
chars = sorted(set(text))
data = torch.tensor([chars.index(c) for c in text])
block, vocab = 8, len(chars)
model = nn.Sequential(nn.Embedding(vocab, 16), nn.Flatten(), nn.Linear(16 * block, vocab))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
ckpt_path = os.path.join(args.out_dir, "ckpt.pt")

iter_num = 0
if args.init_from == "scratch":
    print("Initializing a new model from scratch")
else:
    print(f"Resuming training from {args.out_dir}")
    checkpoint = torch.load(ckpt_path, map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    iter_num = checkpoint["iter_num"]


def get_batch():
    ix = torch.randint(len(data) - block - 1, (4,))
    x = torch.stack([data[i : i + block] for i in ix])
    return x, data[ix + block]


while iter_num < args.max_iters:
    if iter_num > 0 and iter_num % args.eval_interval == 0:
        os.makedirs(args.out_dir, exist_ok=True)
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iter_num": iter_num}
        print(f"saving checkpoint to {args.out_dir}")
        torch.save(state, ckpt_path)
    x, y = get_batch()
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    print(f"iter {iter_num}: loss {loss.item():.4f}", flush=True)
    time.sleep(args.iter_sleep)
    iter_num += 1

torch.save(model.state_dict(), "model.pt")
