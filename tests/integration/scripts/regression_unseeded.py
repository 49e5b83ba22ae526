"""pytorch/examples regression/main.py, as published: fits a random degree-4 polynomial, draws its own
random target with no seed of its own, writes no file, and prints its final loss and the function."""

import torch
import torch.nn.functional as F

POLY_DEGREE = 4
W_target = torch.randn(POLY_DEGREE, 1) * 5
b_target = torch.randn(1) * 5


def make_features(x):
    x = x.unsqueeze(1)
    return torch.cat([x**i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x):
    return x.mm(W_target) + b_target.item()


def poly_desc(W, b):
    result = "y = "
    for i, w in enumerate(W):
        result += f"{w:+.2f} x^{i + 1} "
    result += f"{b[0]:+.2f}"
    return result


def get_batch(batch_size=32):
    random = torch.randn(batch_size)
    x = make_features(random)
    return x, f(x)


fc = torch.nn.Linear(W_target.size(0), 1)
for batch_idx in range(1, 200):  # noqa: B007 (as upstream: printed after the loop)
    batch_x, batch_y = get_batch()
    fc.zero_grad()
    output = F.smooth_l1_loss(fc(batch_x), batch_y)
    loss = output.item()
    output.backward()
    for param in fc.parameters():
        param.data.add_(-0.1 * param.grad)
    if loss < 1e-3:
        break

print(f"Loss: {loss:.6f} after {batch_idx} batches")
print("==> Learned function:\t" + poly_desc(fc.weight.view(-1), fc.bias))
print("==> Actual function:\t" + poly_desc(W_target.view(-1), b_target))
