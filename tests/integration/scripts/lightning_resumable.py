"""Lightning with ModelCheckpoint(save_last=True); resumes with ckpt_path="last" when a checkpoint is there.

Shuffled DataLoader, dropout, noise drawn in training_step from torch's global generator:
the random streams a resumed fit continues only if they are restored at the load.
"""

import argparse
import os
import time

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(L.LightningModule):
    def __init__(self, hidden: int = 16, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Dropout(0.3), nn.Linear(hidden, 2))

    def training_step(self, batch, batch_idx):
        x, y = batch
        x = x + torch.randn_like(x) * 0.05  # augmentation from the global generator
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class Pause(Callback):
    """Extra per-epoch work (evaluation, logging) after the epoch's checkpoint."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_train_epoch_end(self, trainer, pl_module):
        time.sleep(self.seconds)


parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--data", default="data/points.csv")
parser.add_argument("--ckpt-dir", default="checkpoints")
parser.add_argument("--epoch-sleep", type=float, default=0.0)
parser.add_argument("--save", default="model.pt")
args = parser.parse_args()

L.seed_everything(1337)
rows = [line.split(",") for line in open(args.data).read().split()]
x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
y = torch.tensor([int(c) for _, _, c in rows])
loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
model = Classifier()
trainer = L.Trainer(
    max_epochs=args.epochs,
    accelerator="cpu",
    callbacks=[ModelCheckpoint(dirpath=args.ckpt_dir, save_last=True), Pause(args.epoch_sleep)],
    logger=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
last = os.path.join(args.ckpt_dir, "last.ckpt")
trainer.fit(model, loader, ckpt_path=last if os.path.exists(last) else None)
torch.save(model.state_dict(), args.save)
