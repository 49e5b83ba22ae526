"""A tiny BERT (built from a config, no downloaded weights) fine-tuned with the Hugging Face Trainer."""

import argparse

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from repro.integrations.hf import ReproCallback

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--output-dir", default="outputs/hf")
args = parser.parse_args()


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(1, 50, (n, 8), generator=g)
        self.labels = (self.ids[:, 0] > 25).long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict:
        mask = torch.ones(8, dtype=torch.long)
        return {"input_ids": self.ids[i], "attention_mask": mask, "labels": self.labels[i]}


config = BertConfig(
    vocab_size=50,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=16,
    num_labels=2,
)
model = BertForSequenceClassification(config)
training = TrainingArguments(
    output_dir=args.output_dir,
    num_train_epochs=args.epochs,
    per_device_train_batch_size=8,
    learning_rate=1e-3,
    logging_steps=1,
    save_strategy="no",
    report_to="none",
    seed=args.seed,
    use_cpu=True,
    disable_tqdm=True,
)
trainer = Trainer(model=model, args=training, train_dataset=Tokens(32), callbacks=[ReproCallback()])
trainer.train()
trainer.save_model(args.output_dir)
