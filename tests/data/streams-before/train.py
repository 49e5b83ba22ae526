"""A two-layer classifier on a CSV with Lightning: argparse, a shuffled DataLoader with 2 workers,
checkpoints in checkpoints/ every epoch (continues from checkpoints/last.ckpt when present), metrics
and params through repro's Lightning logger."""

import argparse
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from repro.integrations.lightning import ReproCallback, ReproLogger


class Classifier(L.LightningModule):
    def __init__(self, hidden: int = 8, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=False)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    rows = [line.split(",") for line in Path("data/points.csv").read_text().split()]
    x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
    y = torch.tensor([int(c) for _, _, c in rows])
    dataset = TensorDataset(x, y)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    trainer = L.Trainer(
        max_epochs=args.epochs,
        accelerator="cpu",
        logger=ReproLogger(),
        callbacks=[ReproCallback(), ModelCheckpoint(dirpath="checkpoints", save_top_k=-1, save_last=True)],
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    last = Path("checkpoints/last.ckpt")
    trainer.fit(Classifier(), loader, ckpt_path=str(last) if last.exists() else None)
    torch.save(trainer.lightning_module.state_dict(), "model.pt")
