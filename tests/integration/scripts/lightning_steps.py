"""A LightningModule and a LightningDataModule with DataLoader workers; ModelCheckpoint every few
training steps (each one kept, and last.ckpt); `trainer.fit(..., ckpt_path="last")` continues from it.

Dropout in the model, noise drawn in training_step from torch's global generator, a random
jitter of every sample drawn in the workers: the streams a resumed fit continues only if they are
restored, and the batches only if the epoch continues where it stopped.
"""

import argparse
import os

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
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
        return self.x[i] + torch.randn(2) * 0.02, self.y[i]  # augmentation, in the worker


class PointsData(L.LightningDataModule):
    def __init__(self, path: str, batch_size: int, workers: int) -> None:
        super().__init__()
        self.path, self.batch_size, self.workers = path, batch_size, workers

    def setup(self, stage: str) -> None:
        self.train = Points(self.path)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True, num_workers=self.workers)


class Classifier(L.LightningModule):
    def __init__(self, hidden: int = 16, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Dropout(0.3), nn.Linear(hidden, 2))

    def training_step(self, batch, batch_idx):
        x, y = batch
        x = x + torch.randn_like(x) * 0.05
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.9)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def main() -> None:
    parser = argparse.ArgumentParser(description="train a classifier with Lightning")
    parser.add_argument("--data", default="data/points.csv")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--every", type=int, default=3, help="checkpoint every N training steps")
    parser.add_argument("--ckpt-dir", default="checkpoints")
    parser.add_argument("--save", default="outputs/model.pt")
    args = parser.parse_args()

    L.seed_everything(1337, workers=True)
    checkpoints = ModelCheckpoint(
        dirpath=args.ckpt_dir, every_n_train_steps=args.every, save_top_k=-1, save_last=True
    )
    trainer = L.Trainer(
        max_epochs=args.epochs,
        accelerator="cpu",
        callbacks=[checkpoints],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    model = Classifier()
    trainer.fit(model, datamodule=PointsData(args.data, args.batch_size, args.workers), ckpt_path="last")
    os.makedirs(os.path.dirname(args.save) or ".", exist_ok=True)
    torch.save({"model": model.state_dict(), "optimizer": trainer.optimizers[0].state_dict()}, args.save)


if __name__ == "__main__":
    main()
