"""Causal language modelling with the Hugging Face Trainer, in the shape of `run_clm.py`.

A 2-layer GPT-2 built from a config (no download) on a character-level text file; the Trainer
checkpoints every few steps and continues from the last checkpoint of its output directory when
there is one (`get_last_checkpoint`, as `run_clm.py` does). Two DataLoader workers, dropout,
and with ``--augment`` a random crop of every block drawn in the workers.
"""

import argparse
import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

parser = argparse.ArgumentParser(description="train a tiny GPT-2 on a text file")
parser.add_argument("--train_file", default="data/text.txt")
parser.add_argument("--output_dir", default="checkpoints")
parser.add_argument("--save_dir", default="outputs/model")
parser.add_argument("--block_size", type=int, default=16)
parser.add_argument("--num_train_epochs", type=float, default=3)
parser.add_argument("--save_steps", type=int, default=3)
parser.add_argument("--dataloader_num_workers", type=int, default=2)
parser.add_argument("--augment", action="store_true", help="random crop of each block, in the workers")
parser.add_argument("--seed", type=int, default=42)
args = parser.parse_args()

text = open(args.train_file, encoding="utf-8").read()
vocab = sorted(set(text))
ids = torch.tensor([vocab.index(c) for c in text])


class Blocks(torch.utils.data.Dataset):
    """Blocks of ``block_size + 4`` characters; each item is a crop of ``block_size`` of them."""

    def __init__(self, ids, size):
        self.ids, self.size = ids, size
        self.n = (len(ids) - 4) // size

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        shift = int(torch.randint(0, 4, ())) if args.augment else 0
        block = self.ids[i * self.size + shift : (i + 1) * self.size + shift]
        return {"input_ids": block, "labels": block.clone()}


config = GPT2Config(
    vocab_size=len(vocab), n_positions=args.block_size, n_embd=32, n_layer=2, n_head=2,
    resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
)  # fmt: skip
training_args = TrainingArguments(
    output_dir=args.output_dir,
    num_train_epochs=args.num_train_epochs,
    per_device_train_batch_size=4,
    learning_rate=3e-3,
    warmup_steps=2,
    save_strategy="steps",
    save_steps=args.save_steps,
    dataloader_num_workers=args.dataloader_num_workers,
    logging_steps=1,
    report_to="none",
    seed=args.seed,
    use_cpu=True,
    disable_tqdm=True,
)
torch.manual_seed(training_args.seed)
model = GPT2LMHeadModel(config)
last_checkpoint = get_last_checkpoint(args.output_dir) if os.path.isdir(args.output_dir) else None
if last_checkpoint is not None:
    print(f"Checkpoint detected, resuming training at {last_checkpoint}.", flush=True)
trainer = Trainer(model=model, args=training_args, train_dataset=Blocks(ids, args.block_size))
trainer.train(resume_from_checkpoint=last_checkpoint)
trainer.save_model(args.save_dir)
torch.save(trainer.optimizer.state_dict(), os.path.join(args.save_dir, "optimizer.pt"))
