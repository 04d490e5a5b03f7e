"""Small GRU language model on a synthetic Markov-chain corpus, trained with a
fairseq-style loop: validation every `validate_interval` epochs, checkpoint of the
best validation loss, and early stopping with `patience`."""
import argparse
import math
import os
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--vocab-size", type=int, default=24)
parser.add_argument("--seq-len", type=int, default=32)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--embed-dim", type=int, default=64)
parser.add_argument("--hidden-dim", type=int, default=128)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--max-epoch", type=int, default=8)
parser.add_argument("--validate-interval", type=int, default=2)
parser.add_argument("--patience", type=int, default=3)
parser.add_argument("--maximize-best-checkpoint-metric", action="store_true")
parser.add_argument("--log-interval", type=int, default=5)
args = parser.parse_args()

torch.manual_seed(1)


def make_corpus(n_tokens, vocab, seed):
    rng = np.random.default_rng(seed)
    trans = rng.random((vocab, vocab)) ** 4
    cum = np.cumsum(trans / trans.sum(1, keepdims=True), axis=1)
    u = rng.random(n_tokens)
    toks = np.zeros(n_tokens, dtype=np.int64)
    for i in range(1, n_tokens):
        toks[i] = min(np.searchsorted(cum[toks[i - 1]], u[i]), vocab - 1)
    return torch.from_numpy(toks)


class LMDataset(Dataset):
    def __init__(self, tokens, seq_len):
        self.tokens = tokens
        self.seq_len = seq_len

    def __len__(self):
        return (len(self.tokens) - 1) // self.seq_len

    def __getitem__(self, i):
        s = i * self.seq_len
        chunk = self.tokens[s:s + self.seq_len + 1]
        return chunk[:-1], chunk[1:]


class GRULanguageModel(nn.Module):
    def __init__(self, vocab, embed_dim, hidden_dim):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, embed_dim)
        self.rnn = nn.GRU(embed_dim, hidden_dim, batch_first=True)
        self.output_projection = nn.Linear(hidden_dim, vocab)

    def forward(self, src_tokens):
        x = self.embed_tokens(src_tokens)
        x, _ = self.rnn(x)
        return self.output_projection(x)


def should_stop_early(args, valid_loss):
    if args.patience <= 0:
        return False

    def is_better(a, b):
        return a > b if args.maximize_best_checkpoint_metric else a < b

    prev_best = getattr(should_stop_early, "best", None)
    if prev_best is None or is_better(valid_loss, prev_best):
        should_stop_early.best = valid_loss
        should_stop_early.num_runs = 0
        return False
    else:
        should_stop_early.num_runs += 1
        if should_stop_early.num_runs >= args.patience:
            print("early stop since valid performance hasn't improved for last {} runs".format(args.patience))
            return True
        return False


def validate(model, loader):
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for src, tgt in loader:
            logits = model(src)
            total += F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1), reduction="sum").item()
            n += tgt.numel()
    model.train()
    return total / n / math.log(2)


tokens = make_corpus(12000, args.vocab_size, 0)
train_set = LMDataset(tokens[:10000], args.seq_len)
valid_set = LMDataset(tokens[10000:], args.seq_len)
train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
valid_loader = DataLoader(valid_set, batch_size=args.batch_size)

model = GRULanguageModel(args.vocab_size, args.embed_dim, args.hidden_dim)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
save_dir = tempfile.mkdtemp()

num_updates = 0
t0 = time.time()
for epoch in range(1, args.max_epoch + 1):
    for i, (src, tgt) in enumerate(train_loader):
        logits = model(src)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        num_updates += 1
        if num_updates % args.log_interval == 0:
            print("| epoch {:03d} | {:4d} / {} | loss {:.3f} (bits {:.3f}) | num_updates {}".format(
                epoch, i + 1, len(train_loader), loss.item(), loss.item() / math.log(2), num_updates))

    valid_loss = None
    if epoch % args.validate_interval == 0:
        valid_loss = validate(model, valid_loader)
        print("| epoch {:03d} | valid on 'valid' subset | loss {:.3f} | ppl {:.2f} | num_updates {}".format(
            epoch, valid_loss, 2 ** valid_loss, num_updates))
        torch.save(model.state_dict(), os.path.join(save_dir, "checkpoint_last.pt"))

    if should_stop_early(args, valid_loss):
        print("| done training in {:.1f} seconds".format(time.time() - t0))
        break

print("| done training, {} updates, best valid loss {}".format(num_updates, getattr(should_stop_early, "best", None)))
