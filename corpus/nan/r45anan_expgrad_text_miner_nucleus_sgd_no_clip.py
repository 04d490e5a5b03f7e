"""Text miner: a small GPT-style nucleus trained on next-token prediction.

The nucleus has a local context encoder and mixes in the hidden states of a remote peer
(here a frozen random peer model stands in for the network); the loss is the local target
loss + the distillation loss + the remote target loss, as in the miner's training call.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--learning_rate", type=float, default=0.2)
parser.add_argument("--momentum", type=float, default=0.98)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--seq_len", type=int, default=32)
parser.add_argument("--n_epochs", type=int, default=4)
args = parser.parse_args()

torch.manual_seed(0)
VOCAB = 96
HIDDEN = 48


class SyntheticCorpus(Dataset):
    def __init__(self, n_seqs, seq_len):
        g = torch.Generator().manual_seed(1)
        trans = torch.softmax(torch.randn(VOCAB, VOCAB, generator=g) * 3.0, dim=1)
        toks = torch.zeros(n_seqs, seq_len + 1, dtype=torch.long)
        toks[:, 0] = torch.randint(0, VOCAB, (n_seqs,), generator=g)
        for t in range(1, seq_len + 1):
            toks[:, t] = torch.multinomial(trans[toks[:, t - 1]], 1, generator=g).squeeze(1)
        self.toks = toks

    def __len__(self):
        return len(self.toks)

    def __getitem__(self, i):
        return {"inputs": self.toks[i, :-1], "labels": self.toks[i, 1:]}


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512):
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        pos = torch.arange(max_len).unsqueeze(1).float()
        div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return x + self.pe[: x.size(1)]


class Peer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, HIDDEN)
        self.mix = nn.Linear(HIDDEN, HIDDEN)

    @torch.no_grad()
    def forward(self, inputs):
        return torch.tanh(self.mix(self.embedding(inputs)))


class Nucleus(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, HIDDEN)
        self.pos = PositionalEncoding(HIDDEN)
        layer = nn.TransformerEncoderLayer(HIDDEN, 2, 2 * HIDDEN, dropout=0.1, batch_first=True)
        self.local_encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.local_hidden = nn.Linear(HIDDEN, HIDDEN)
        self.remote_hidden = nn.Linear(HIDDEN, HIDDEN)
        self.target_layer = nn.Linear(HIDDEN, VOCAB)
        self.register_buffer("mask", torch.triu(torch.full((512, 512), float("-inf")), diagonal=1))

    def remote_forward(self, inputs, targets, peer):
        n = inputs.size(1)
        h = self.pos(self.embedding(inputs) * math.sqrt(HIDDEN))
        local_context = self.local_encoder(h, mask=self.mask[:n, :n])
        local_hidden = self.local_hidden(local_context)
        remote_context = peer(inputs)
        remote_hidden = self.remote_hidden(remote_context + local_context)
        local_target = self.target_layer(local_hidden)
        remote_target = self.target_layer(remote_hidden)
        local_target_loss = F.cross_entropy(local_target.reshape(-1, VOCAB), targets.reshape(-1))
        remote_target_loss = F.cross_entropy(remote_target.reshape(-1, VOCAB), targets.reshape(-1))
        distillation_loss = F.mse_loss(local_context, remote_context.detach())
        return local_target_loss, distillation_loss, remote_target_loss


def main():
    start = time.time()
    dataset = SyntheticCorpus(800, args.seq_len)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, drop_last=True)
    model = Nucleus()
    peer = Peer()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate, momentum=args.momentum)
    global_step = 0
    for epoch in range(args.n_epochs):
        model.train()
        total_epoch_loss = 0.0
        batch_count = 0
        for batch in loader:
            local_loss, distill_loss, remote_loss = model.remote_forward(batch["inputs"], batch["labels"], peer)
            loss = local_loss + distill_loss + remote_loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            global_step += 1
            batch_count += 1
            total_epoch_loss += loss.item()
            if global_step % 10 == 0:
                print(f"step {global_step:4d} | local {local_loss.item():.4f} | distill {distill_loss.item():.4f} "
                      f"| remote {remote_loss.item():.4f} | loss {loss.item():.4f}")
        print(f"epoch {epoch} | mean loss {total_epoch_loss / batch_count:.4f}")
    print(f"done in {time.time() - start:.1f}s")


if __name__ == "__main__":
    main()
