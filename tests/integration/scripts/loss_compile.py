"""Only the loss function is compiled (`@torch.compile`), the model runs eagerly; model.pt at the end."""

import argparse

import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--eager", action="store_true", help="skip torch.compile")
args = parser.parse_args()


def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    smooth = F.log_softmax(logits, dim=-1).mean(dim=-1)
    return 0.9 * F.cross_entropy(logits, target) - 0.1 * smooth.mean() + 1e-3 * logits.pow(2).mean()


if not args.eager:
    loss_fn = torch.compile(loss_fn)
model = torch.nn.Linear(12, 5)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
x, y = torch.randn(48, 12), torch.randint(0, 5, (48,))
for _ in range(args.steps):
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"final loss {loss.item():.6f}")
torch.save(model.state_dict(), "model.pt")
