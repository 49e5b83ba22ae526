"""In the shape of pytorch/examples mnist/main.py: argparse, a self-seeded script, the model saved
into the working directory and read back for evaluation, DataLoader workers with augmentation."""

import argparse
import os
import random

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset


class Points(Dataset):
    def __init__(self, path, train=True):
        rows = [line.split(",") for line in open(path).read().split()]
        rows = rows[: len(rows) * 3 // 4] if train else rows[len(rows) * 3 // 4 :]
        self.x = torch.tensor([[float(a), float(b)] for a, b, _ in rows])
        self.y = torch.tensor([int(c) for _, _, c in rows])
        self.train = train

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        x = self.x[i]
        if self.train:  # random augmentation, drawn in the worker
            x = x + torch.randn(2) * 0.05 + random.uniform(-0.02, 0.02)
        return x, self.y[i]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 12)
        self.dropout = nn.Dropout(0.25)
        self.fc2 = nn.Linear(12, 2)

    def forward(self, x):
        return F.log_softmax(self.fc2(self.dropout(F.relu(self.fc1(x)))), dim=1)


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print(
                "Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(  # noqa: UP032 (as upstream)
                    epoch,
                    batch_idx * len(data),
                    len(train_loader.dataset),
                    100.0 * batch_idx / len(train_loader),
                    loss.item(),
                )
            )


def test(model, device, test_loader):
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data.to(device))
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            correct += output.argmax(dim=1).eq(target).sum().item()
    test_loss /= len(test_loader.dataset)
    print(f"\nTest set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{len(test_loader.dataset)}\n")


def main():
    parser = argparse.ArgumentParser(description="PyTorch MNIST-style Example")
    parser.add_argument("--batch-size", type=int, default=8, metavar="N")
    parser.add_argument("--test-batch-size", type=int, default=16, metavar="N")
    parser.add_argument("--epochs", type=int, default=2, metavar="N")
    parser.add_argument("--lr", type=float, default=1.0, metavar="LR")
    parser.add_argument("--gamma", type=float, default=0.7, metavar="M")
    parser.add_argument("--no-cuda", action="store_true", default=False)
    parser.add_argument("--seed", type=int, default=1, metavar="S", help="random seed (-1: from the OS)")
    parser.add_argument("--log-interval", type=int, default=3, metavar="N")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--data", default="data/points.csv")
    parser.add_argument("--save-model", action="store_true", default=False)
    args = parser.parse_args()
    if args.seed < 0:
        args.seed = int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() and not args.no_cuda else "cpu")

    train_loader = DataLoader(
        Points(args.data), batch_size=args.batch_size, shuffle=True, num_workers=args.workers
    )
    test_loader = DataLoader(Points(args.data, train=False), batch_size=args.test_batch_size)
    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()

    if args.save_model:
        torch.save(model.state_dict(), "mnist_cnn.pt")
        evaluated = Net()
        evaluated.load_state_dict(torch.load("mnist_cnn.pt"))
        test(evaluated, device, test_loader)


if __name__ == "__main__":
    main()
