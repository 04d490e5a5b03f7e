"""Convolutional (gated, causal) language model with an OpenNMT-style trainer.

Training computes the generator (projection to the vocabulary + log-softmax) and the loss in
shards over the time dimension; validation runs after every epoch on the held-out sentences.
The corpus is a synthetic language: every word has a handful of likely successors.
"""
import argparse
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(7)

parser = argparse.ArgumentParser()
parser.add_argument("--vocab_size", type=int, default=4000)
parser.add_argument("--seq_len", type=int, default=24)
parser.add_argument("--hidden_size", type=int, default=128)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--valid_batch_size", type=int, default=1024)
parser.add_argument("--max_generator_batches", type=int, default=8, help="time steps per loss shard")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--learning_rate", type=float, default=2e-3)


class MarkovCorpus(Dataset):
    def __init__(self, n_sentences, vocab_size, seq_len, successors, generator):
        first = torch.randint(1, vocab_size, (n_sentences,), generator=generator)
        tokens = [first]
        for _ in range(seq_len):
            choice = torch.randint(0, successors.size(1), (n_sentences,), generator=generator)
            tokens.append(successors[tokens[-1], choice])
        self.data = torch.stack(tokens, dim=1)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]


def collate(batch):
    batch = torch.stack(batch).t().contiguous()
    return batch[:-1], batch[1:]


class GatedConvLM(nn.Module):
    """ConvS2S-style decoder stack: causal convolutions with gated linear units and residuals."""

    def __init__(self, vocab_size, hidden_size, num_layers=3, kernel_width=3):
        super().__init__()
        self.kernel_width = kernel_width
        self.embeddings = nn.Embedding(vocab_size, hidden_size)
        self.convs = nn.ModuleList(
            [nn.Conv1d(hidden_size, 2 * hidden_size, kernel_width) for _ in range(num_layers)])
        self.dropout = nn.Dropout(0.1)

    def forward(self, src):
        x = self.embeddings(src).permute(1, 2, 0)  # (batch, hidden, time)
        for conv in self.convs:
            residual = x
            x = nn.functional.pad(x, (self.kernel_width - 1, 0))
            x = nn.functional.glu(conv(self.dropout(x)), dim=1)
            x = (x + residual) * math.sqrt(0.5)
        return x.permute(2, 0, 1).contiguous()  # (time, batch, hidden)


class Statistics:
    def __init__(self):
        self.loss = 0.0
        self.n_words = 0

    def update(self, loss, n_words):
        self.loss += loss
        self.n_words += n_words

    def ppl(self):
        return math.exp(min(self.loss / max(self.n_words, 1), 100))


class Trainer:
    def __init__(self, model, generator, optim, opt):
        self.model = model
        self.generator = generator
        self.optim = optim
        self.opt = opt
        self.criterion = nn.NLLLoss(reduction="sum")

    def sharded_compute_loss(self, output, target, shard_size, normalization):
        output_leaf = output.detach().requires_grad_()
        total = 0.0
        for out_shard, tgt_shard in zip(torch.split(output_leaf, shard_size), torch.split(target, shard_size)):
            scores = self.generator(out_shard.reshape(-1, out_shard.size(2)))
            loss = self.criterion(scores, tgt_shard.reshape(-1))
            (loss / normalization).backward()
            total += loss.item()
        output.backward(output_leaf.grad)
        return total

    def monolithic_compute_loss(self, output, target):
        scores = self.generator(output.view(-1, output.size(2)))
        loss = self.criterion(scores, target.view(-1))
        return loss.item()

    def train_epoch(self, train_iter, epoch):
        self.model.train()
        stats = Statistics()
        for i, (src, tgt) in enumerate(train_iter):
            self.optim.zero_grad()
            output = self.model(src)
            loss = self.sharded_compute_loss(output, tgt, self.opt.max_generator_batches, tgt.numel())
            self.optim.step()
            stats.update(loss, tgt.numel())
            if i % 5 == 0:
                print(f"Epoch {epoch}, {i}/{len(train_iter)}; ppl: {stats.ppl():.2f}")
        return stats

    def validate(self, valid_iter):
        self.model.eval()
        stats = Statistics()
        with torch.no_grad():
            for src, tgt in valid_iter:
                output = self.model(src)
                loss = self.monolithic_compute_loss(output, tgt)
                stats.update(loss, tgt.numel())
        return stats


def main(opt):
    g = torch.Generator().manual_seed(0)
    successors = torch.randint(1, opt.vocab_size, (opt.vocab_size, 4), generator=g)
    train_data = MarkovCorpus(320, opt.vocab_size, opt.seq_len, successors, g)
    valid_data = MarkovCorpus(2048, opt.vocab_size, opt.seq_len, successors, g)
    train_iter = DataLoader(train_data, batch_size=opt.batch_size, shuffle=True, collate_fn=collate)
    valid_iter = DataLoader(valid_data, batch_size=opt.valid_batch_size, collate_fn=collate)

    model = GatedConvLM(opt.vocab_size, opt.hidden_size)
    generator = nn.Sequential(nn.Linear(opt.hidden_size, opt.vocab_size), nn.LogSoftmax(dim=-1))
    optim = torch.optim.Adam(list(model.parameters()) + list(generator.parameters()), lr=opt.learning_rate)
    trainer = Trainer(model, generator, optim, opt)

    for epoch in range(1, opt.epochs + 1):
        train_stats = trainer.train_epoch(train_iter, epoch)
        print(f"Train perplexity: {train_stats.ppl():.2f}")
        valid_stats = trainer.validate(valid_iter)
        print(f"Validation perplexity: {valid_stats.ppl():.2f}")


if __name__ == "__main__":
    main(parser.parse_args())
