"""Lightning as the README shows it: ReproLogger + ReproCallback, ModelCheckpoint with no dirpath of its own
(best by validation loss, and the last), a validation loop, DataLoader workers, the progress bar on."""

import argparse
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from repro.integrations.lightning import ReproCallback, ReproLogger


class Classifier(L.LightningModule):
    def __init__(self, hidden: int = 16, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Dropout(0.2), nn.Linear(hidden, 2))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y), prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--data", default="data/points.csv")
args = parser.parse_args()

rows = [line.split(",") for line in Path(args.data).read_text().split()]
x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
y = torch.tensor([int(c) for _, _, c in rows])
train = DataLoader(TensorDataset(x[:64], y[:64]), batch_size=8, shuffle=True, num_workers=args.workers)
val = DataLoader(TensorDataset(x[64:], y[64:]), batch_size=16, num_workers=args.workers)
checkpoint = ModelCheckpoint(monitor="val_loss", save_top_k=2, save_last=True)
trainer = L.Trainer(
    max_epochs=args.epochs,
    accelerator="cpu",
    deterministic=True,
    log_every_n_steps=2,
    logger=ReproLogger(),
    callbacks=[ReproCallback(), checkpoint],
)
trainer.fit(Classifier(), train, val)
print(f"best checkpoint: {checkpoint.best_model_path} ({checkpoint.best_model_score:.6f})")
