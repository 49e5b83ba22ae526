"""In the shape of pytorch/examples word_language_model/main.py: `--save model.pt` in the working
directory, `| epoch | ms/batch | loss | ppl` timing lines, the best model reloaded at the end."""

import argparse
import math
import time

import torch
from torch import nn

parser = argparse.ArgumentParser(description="PyTorch RNN/LSTM Language Model")
parser.add_argument("--data", type=str, default="data/corpus.txt", help="location of the data corpus")
parser.add_argument("--emsize", type=int, default=8)
parser.add_argument("--nhid", type=int, default=8)
parser.add_argument("--lr", type=float, default=5.0)
parser.add_argument("--clip", type=float, default=0.25)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch_size", type=int, default=4, metavar="N")
parser.add_argument("--bptt", type=int, default=6)
parser.add_argument("--dropout", type=float, default=0.2)
parser.add_argument("--seed", type=int, default=1111)
parser.add_argument("--log-interval", type=int, default=2, metavar="N")
parser.add_argument("--save", type=str, default="model.pt", help="path to save the final model")
args = parser.parse_args()

torch.manual_seed(args.seed)

words = open(args.data).read().split()
vocab = {w: i for i, w in enumerate(sorted(set(words)))}
ids = torch.tensor([vocab[w] for w in words])
nbatch = ids.size(0) // args.batch_size
data = ids[: nbatch * args.batch_size].view(args.batch_size, -1).t().contiguous()


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, dropout):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, x, hidden):
        output, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return self.decoder(self.drop(output)), hidden


model = RNNModel(len(vocab), args.emsize, args.nhid, args.dropout)
criterion = nn.CrossEntropyLoss()


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].reshape(-1)


def train(epoch, lr):
    model.train()
    total_loss, start_time = 0.0, time.time()
    hidden = None
    for batch, i in enumerate(range(0, data.size(0) - 1, args.bptt)):
        x, targets = get_batch(data, i)
        model.zero_grad()
        output, hidden = model(x, hidden)
        hidden = tuple(h.detach() for h in hidden)
        loss = criterion(output.view(-1, len(vocab)), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total_loss += loss.item()
        if batch % args.log_interval == 0 and batch > 0:
            cur_loss = total_loss / args.log_interval
            elapsed = time.time() - start_time
            print(
                "| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | "  # noqa: UP032
                "loss {:5.2f} | ppl {:8.2f}".format(
                    epoch,
                    batch,
                    len(data) // args.bptt,
                    lr,
                    elapsed * 1000 / args.log_interval,
                    cur_loss,
                    math.exp(cur_loss),
                )
            )
            total_loss, start_time = 0.0, time.time()


lr = args.lr
for epoch in range(1, args.epochs + 1):
    epoch_start_time = time.time()
    train(epoch, lr)
    print("-" * 89)
    print(f"| end of epoch {epoch:3d} | time: {time.time() - epoch_start_time:5.2f}s |")
    print("-" * 89)
    with open(args.save, "wb") as f:
        torch.save(model, f)

with open(args.save, "rb") as f:
    model = torch.load(f, weights_only=False)
print("=" * 89)
print("| End of training | reloaded", args.save)
