"""nanoGPT-style training with `model = torch.compile(model)` behind `--compile`: a tiny causal
language model, AdamW, a data loader of random token batches, `out/ckpt.pt` at the end."""

import argparse
import os

import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--compile", action="store_true")
parser.add_argument("--max_iters", type=int, default=12)
parser.add_argument("--block_size", type=int, default=8)
parser.add_argument("--learning_rate", type=float, default=3e-3)
args = parser.parse_args()

vocab, n_embd = 32, 16


class Block(nn.Module):
    """One causal self-attention block (nanoGPT's, without the MLP: compiles are slow on small machines)."""

    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.c_attn(self.ln_1(x)).split(n_embd, dim=2)
        return x + self.c_proj(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class GPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(args.block_size, n_embd)
        self.block = Block()
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.size(1))
        logits = self.lm_head(self.block(self.wte(idx) + self.wpe(pos)))
        return F.cross_entropy(logits.view(-1, vocab), targets.view(-1))


data = torch.randint(0, vocab, (64, args.block_size + 1))
loader = DataLoader(TensorDataset(data[:, :-1], data[:, 1:]), batch_size=16, shuffle=True)
model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.1)
if args.compile:
    print("compiling the model... (takes a ~minute)")
    model = torch.compile(model)
it = 0
while it < args.max_iters:
    for x, y in loader:
        loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if it % 4 == 0:
            print(f"iter {it}: loss {loss.item():.4f}")
        it += 1
        if it == args.max_iters:
            break
os.makedirs("out", exist_ok=True)
torch.save({"model": model.state_dict(), "iter_num": it}, os.path.join("out", "ckpt.pt"))
