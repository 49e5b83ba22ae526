"""Three training scripts in the shape of public code, for bench_determinism_price.py.

Each takes ``--steps`` and ``--warmup``, times the steps after the warm-up with ``time.perf_counter``,
prints ``timed K steps in S s with N threads`` and saves its weights to ``--save``.
"""

from __future__ import annotations

CNN = '''"""A small CNN on synthetic 28x28 digits, loaded by DataLoader workers (pytorch/examples mnist)."""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Digits(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.images = torch.randn(n, 1, 28, 28, generator=g)
        self.labels = torch.randint(0, 10, (n,), generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = self.images[i]
        if torch.rand(()) < 0.5:  # augmentation drawn in the worker
            x = torch.flip(x, dims=[2])
        return x, self.labels[i]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1)
        self.conv2 = nn.Conv2d(16, 32, 3, 1)
        self.dropout = nn.Dropout(0.25)
        self.fc1 = nn.Linear(32 * 12 * 12, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = self.dropout(torch.flatten(x, 1))
        return self.fc2(torch.relu(self.fc1(x)))


def main():
    parser = argparse.ArgumentParser(description="CNN on synthetic digits")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--save", default="model.pt")
    args = parser.parse_args()
    torch.manual_seed(1)
    loader = DataLoader(Digits(args.batch_size * 16), batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers, persistent_workers=args.workers > 0)
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step, start = 0, None
    while step < args.steps:
        for x, y in loader:
            if step == args.warmup:
                start = time.perf_counter()
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step == args.steps:
                break
    took = time.perf_counter() - start
    print(f"timed {args.steps - args.warmup} steps in {took:.4f} s with {torch.get_num_threads()} threads")
    torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
'''

GPT = '''"""A small GPT in the style of nanoGPT (karpathy/nanoGPT model.py, train.py)."""
import argparse
import math
import time

import torch
from torch import nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab, block_size, n_layer=2, n_head=4, n_embd=64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1))
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    parser = argparse.ArgumentParser(description="nanoGPT-style character model")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--block-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--save", default="ckpt.pt")
    args = parser.parse_args()
    torch.manual_seed(1337)
    data = torch.randint(0, 65, (20000,))
    model = GPT(65, args.block_size)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.95))
    start = None
    for step in range(args.steps):
        if step == args.warmup:
            start = time.perf_counter()
        ix = torch.randint(len(data) - args.block_size, (args.batch_size,))
        x = torch.stack([data[i:i + args.block_size] for i in ix])
        y = torch.stack([data[i + 1:i + 1 + args.block_size] for i in ix])
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    took = time.perf_counter() - start
    print(f"timed {args.steps - args.warmup} steps in {took:.4f} s with {torch.get_num_threads()} threads")
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, args.save)


if __name__ == "__main__":
    main()
'''

LSTM = '''"""An LSTM language model (pytorch/examples word_language_model) on a synthetic corpus."""
import argparse
import time

import torch
from torch import nn


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp=64, nhid=128, nlayers=2, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nlayers, self.nhid = nlayers, nhid

    def forward(self, input, hidden):
        output, hidden = self.rnn(self.drop(self.encoder(input)), hidden)
        return self.decoder(self.drop(output)), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        shape = (self.nlayers, bsz, self.nhid)
        return (weight.new_zeros(shape), weight.new_zeros(shape))


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data[: nbatch * bsz].view(bsz, -1).t().contiguous()


def repackage_hidden(h):
    return tuple(v.detach() for v in h)


def main():
    parser = argparse.ArgumentParser(description="LSTM language model")
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--bptt", type=int, default=35)
    parser.add_argument("--lr", type=float, default=20.0)
    parser.add_argument("--clip", type=float, default=0.25)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--save", default="model.pt")
    args = parser.parse_args()
    torch.manual_seed(1111)
    ntokens = 1000
    train_data = batchify(torch.randint(0, ntokens, (args.batch_size * args.bptt * 40,)), args.batch_size)
    model = RNNModel(ntokens)
    criterion = nn.CrossEntropyLoss()
    hidden = model.init_hidden(args.batch_size)
    start, i = None, 0
    for step in range(args.steps):
        if step == args.warmup:
            start = time.perf_counter()
        if i + 1 + args.bptt > train_data.size(0):
            i, hidden = 0, model.init_hidden(args.batch_size)
        data, targets = train_data[i:i + args.bptt], train_data[i + 1:i + 1 + args.bptt].reshape(-1)
        i += args.bptt
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output.view(-1, ntokens), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-args.lr)
    took = time.perf_counter() - start
    print(f"timed {args.steps - args.warmup} steps in {took:.4f} s with {torch.get_num_threads()} threads")
    with open(args.save, "wb") as f:
        torch.save(model.state_dict(), f)


if __name__ == "__main__":
    main()
'''

WORKLOADS = {"CNN + DataLoader workers": ("cnn.py", CNN), "nanoGPT-style GPT": ("gpt.py", GPT),
             "LSTM LM": ("lstm.py", LSTM)}  # fmt: skip
