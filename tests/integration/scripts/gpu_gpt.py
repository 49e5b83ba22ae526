"""A small GPT in the shape of nanoGPT (token and position embeddings, pre-LayerNorm blocks of causal
self-attention and a GELU MLP, weight tying, AdamW with decoupled weight decay, bf16 autocast,
gradient clipping) trained on a fixed synthetic token stream; seeds nothing itself. Attention is
nanoGPT's explicit path (masked softmax), whose kernels all have a deterministic CUDA version.

--compile          torch.compile the model
--no-fill          torch.utils.deterministic.fill_uninitialized_memory = False
--jitter           one op made nondeterministic on purpose (noise seeded from OS entropy)
--timing FILE      the timed steps' seconds per step, written there (outside the project)
"""

import argparse
import json
import math
import os
import time

import torch
from torch import nn
from torch.nn import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=60)
parser.add_argument("--warmup_iters", type=int, default=10)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--block_size", type=int, default=128)
parser.add_argument("--n_layer", type=int, default=4)
parser.add_argument("--n_embd", type=int, default=256)
parser.add_argument("--compile", action="store_true")
parser.add_argument("--no-fill", action="store_true")
parser.add_argument("--jitter", action="store_true")
parser.add_argument("--timing", default=None)
parser.add_argument("--out_dir", default="out")
args = parser.parse_args()
if args.no_fill:
    torch.utils.deterministic.fill_uninitialized_memory = False

VOCAB, HEADS = 512, 4
device = torch.device("cuda")
stream = torch.randint(0, VOCAB, (200_000,), generator=torch.Generator().manual_seed(0)).to(device)
if args.jitter:
    ENTROPY = torch.Generator(device).manual_seed(int.from_bytes(os.urandom(8), "little"))


class CausalSelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_attn = nn.Linear(args.n_embd, 3 * args.n_embd)
        self.c_proj = nn.Linear(args.n_embd, args.n_embd)
        self.attn_dropout, self.resid_dropout = nn.Dropout(0.1), nn.Dropout(0.1)
        mask = torch.tril(torch.ones(args.block_size, args.block_size))
        self.register_buffer("bias", mask.view(1, 1, args.block_size, args.block_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(args.n_embd, dim=2)
        q, k, v = (t.view(B, T, HEADS, C // HEADS).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_fc = nn.Linear(args.n_embd, 4 * args.n_embd)
        self.c_proj = nn.Linear(4 * args.n_embd, args.n_embd)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.c_fc(x))
        if args.jitter:  # noise from a generator seeded from OS entropy: other bits in every run
            x = x + torch.randn(x.shape, dtype=x.dtype, device=x.device, generator=ENTROPY)  # forced diff
        return self.dropout(self.c_proj(x))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(args.n_embd), CausalSelfAttention()
        self.ln_2, self.mlp = nn.LayerNorm(args.n_embd), MLP()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, args.n_embd), nn.Embedding(args.block_size, args.n_embd)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList(Block() for _ in range(args.n_layer))
        self.ln_f = nn.LayerNorm(args.n_embd)
        self.lm_head = nn.Linear(args.n_embd, VOCAB, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
    ix = torch.randint(len(stream) - args.block_size - 1, (args.batch_size,), device=device)
    x = torch.stack([stream[i : i + args.block_size] for i in ix])
    y = torch.stack([stream[i + 1 : i + 1 + args.block_size] for i in ix])
    return x, y


model = GPT().to(device)
decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
optimizer = torch.optim.AdamW(
    [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
    lr=6e-4,
    betas=(0.9, 0.95),
)
step_model = torch.compile(model) if args.compile else model
print(f"number of parameters: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M")
start = None
for it in range(args.warmup_iters + args.max_iters):
    if it == args.warmup_iters:
        torch.cuda.synchronize()
        start = time.perf_counter()
    X, Y = get_batch()
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        loss = step_model(X, Y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if it % 10 == 0:
        print(f"iter {it}: loss {loss.item():.4f}")
torch.cuda.synchronize()
if args.timing:
    with open(args.timing, "w") as f:
        json.dump({"s_per_step": (time.perf_counter() - start) / args.max_iters}, f)
os.makedirs(args.out_dir, exist_ok=True)
torch.save(
    {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iter_num": it},
    os.path.join(args.out_dir, "ckpt.pt"),
)
