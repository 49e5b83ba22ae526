"""A training loop in the shape of HF Trainer's: prints its log dicts (`{'loss': …, 'epoch': 0.5}`),
writes checkpoint-N/trainer_state.json at each save and the output dir's trainer_state.json at the
end (log_history with steps); no repro API."""

import argparse
import json
import os
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--output_dir", default="results")
parser.add_argument("--learning_rate", type=float, default=0.05)
parser.add_argument("--max_steps", type=int, default=20)
parser.add_argument("--logging_steps", type=int, default=5)
args = parser.parse_args()
torch.manual_seed(42)
x = torch.randn(80, 6)
y = x @ torch.randn(6, 1)
model = torch.nn.Linear(6, 1)
opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
history = []
start = time.time()
steps_per_epoch = 10
for step in range(1, args.max_steps + 1):
    i = (step - 1) % steps_per_epoch * 8
    loss = torch.nn.functional.mse_loss(model(x[i : i + 8]), y[i : i + 8])
    opt.zero_grad()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item()
    opt.step()
    epoch = round(step / steps_per_epoch, 2)
    if step % args.logging_steps == 0:
        logs = {
            "loss": round(loss.item(), 4),
            "grad_norm": norm,
            "learning_rate": args.learning_rate,
            "epoch": epoch,
        }
        print(logs)
        history.append({**logs, "step": step})
    if step % steps_per_epoch == 0:
        with torch.no_grad():
            ev = torch.nn.functional.mse_loss(model(x[64:]), y[64:]).item()
        logs = {
            "eval_loss": ev,
            "eval_runtime": time.time() - start,
            "eval_samples_per_second": 16.0,
            "epoch": epoch,
        }
        print(logs)
        history.append({**logs, "step": step})
        ckpt = os.path.join(args.output_dir, f"checkpoint-{step}")
        os.makedirs(ckpt, exist_ok=True)
        torch.save(model.state_dict(), os.path.join(ckpt, "pytorch_model.bin"))
        with open(os.path.join(ckpt, "trainer_state.json"), "w") as f:
            json.dump({"global_step": step, "epoch": epoch, "log_history": history}, f, indent=2)
runtime = time.time() - start
final = {
    "train_runtime": runtime,
    "train_samples_per_second": 80 / runtime,
    "train_loss": 0.5,
    "epoch": epoch,
}
print(final)
history.append({**final, "step": args.max_steps})
with open(os.path.join(args.output_dir, "trainer_state.json"), "w") as f:
    json.dump({"global_step": args.max_steps, "epoch": epoch, "log_history": history}, f, indent=2)
