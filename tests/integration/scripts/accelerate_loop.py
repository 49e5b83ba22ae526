"""A training loop in the shape of Accelerate's `complete_nlp_example.py`: `Accelerator`, `prepare`,
`save_state` every few steps into `step_<N>`, and `--resume_from_checkpoint` picking the newest one,
`load_state` and `skip_first_batches` to continue the epoch where it stopped.

Two DataLoader workers jitter every sample, dropout, noise drawn in the loop: the streams a resumed
run continues only if they are restored, and the batches only if the epoch goes on where it stopped.
"""

import argparse
import os
import re

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Points(Dataset):
    def __init__(self, path: str) -> None:
        rows = [line.split(",") for line in open(path).read().split()]
        self.x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
        self.y = torch.tensor([int(c) for _, _, c in rows])

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i] + torch.randn(2) * 0.02, self.y[i]


def newest_checkpoint(output_dir: str) -> str | None:
    if not os.path.isdir(output_dir):
        return None
    steps = [d for d in os.listdir(output_dir) if re.fullmatch(r"step_\d+", d)]
    return os.path.join(output_dir, max(steps, key=lambda d: int(d[5:]))) if steps else None


def training_function(args: argparse.Namespace) -> None:
    accelerator = Accelerator(cpu=True)
    set_seed(args.seed)
    train_dataloader = DataLoader(
        Points(args.data), batch_size=args.batch_size, shuffle=True, num_workers=args.workers
    )
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.9)
    model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, lr_scheduler
    )

    overall_step, starting_epoch, resume_step = 0, 0, None
    path = newest_checkpoint(args.output_dir) if args.resume_from_checkpoint else None
    if path is not None:
        accelerator.print(f"Resumed from checkpoint: {path}")
        accelerator.load_state(path)
        overall_step = int(os.path.basename(path)[5:])
        starting_epoch, resume_step = divmod(overall_step, len(train_dataloader))

    for epoch in range(starting_epoch, args.num_epochs):
        model.train()
        if resume_step and epoch == starting_epoch:
            active_dataloader = accelerator.skip_first_batches(train_dataloader, resume_step)
        else:
            active_dataloader = train_dataloader
        for x, y in active_dataloader:
            loss = nn.functional.cross_entropy(model(x + torch.randn_like(x) * 0.05), y)
            accelerator.backward(loss)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            overall_step += 1
            if overall_step % args.checkpointing_steps == 0:
                accelerator.save_state(os.path.join(args.output_dir, f"step_{overall_step}"))
        accelerator.print(f"epoch {epoch}: loss {loss.item():.6f}")

    accelerator.wait_for_everyone()
    os.makedirs(os.path.dirname(args.save) or ".", exist_ok=True)
    accelerator.save(accelerator.unwrap_model(model).state_dict(), args.save)


def main() -> None:
    parser = argparse.ArgumentParser(description="Simple example of a training script with checkpointing.")
    parser.add_argument("--data", default="data/points.csv")
    parser.add_argument("--num_epochs", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--checkpointing_steps", type=int, default=3)
    parser.add_argument("--output_dir", default="checkpoints")
    parser.add_argument("--resume_from_checkpoint", action="store_true")
    parser.add_argument("--save", default="outputs/model.pt")
    training_function(parser.parse_args())


if __name__ == "__main__":
    main()
