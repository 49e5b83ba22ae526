"""A LightningModule trained with seed_everything and Trainer(deterministic=...), logged through repro."""

import argparse
from pathlib import Path

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from repro.integrations.lightning import ReproCallback, ReproLogger


class Classifier(L.LightningModule):
    def __init__(self, hidden: int = 8, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, 2))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=False)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=1337)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--deterministic", choices=["true", "false"], default="false")
parser.add_argument("--save", default="model.pt")
args = parser.parse_args()

L.seed_everything(args.seed, workers=True)
rows = [line.split(",") for line in Path("data/points.csv").read_text().split()]
x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
y = torch.tensor([int(c) for _, _, c in rows])
loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
model = Classifier()
trainer = L.Trainer(
    max_epochs=args.epochs,
    accelerator="cpu",
    deterministic=args.deterministic == "true",
    logger=ReproLogger(),
    callbacks=[ReproCallback()],
    log_every_n_steps=1,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(model, loader)
torch.save(model.state_dict(), args.save)
