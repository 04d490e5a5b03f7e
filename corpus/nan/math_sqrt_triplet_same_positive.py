"""Sequence representation learning with a triplet loss.

Short token sequences from a small vocabulary are embedded with a GRU; sequences of the
same class should end up close together, sequences of different classes far apart.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
random.seed(0)

VOCAB = 12
SEQ_LEN = 6
N_CLASSES = 4
PER_CLASS = 300


def make_sequences():
    seqs, labels = [], []
    for c in range(N_CLASSES):
        motif = [3 * c, 3 * c + 1, 3 * c + 2]
        for _ in range(PER_CLASS):
            s = [random.choice(motif) if random.random() < 0.7 else random.randrange(VOCAB)
                 for _ in range(SEQ_LEN)]
            seqs.append(s)
            labels.append(c)
    return torch.tensor(seqs), torch.tensor(labels)


class TripletSequences(Dataset):
    def __init__(self, seqs, labels):
        self.seqs = seqs
        self.labels = labels
        self.by_class = {c: (labels == c).nonzero().flatten().tolist() for c in range(N_CLASSES)}

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, i):
        c = int(self.labels[i])
        j = random.choice(self.by_class[c])
        other = random.choice([k for k in range(N_CLASSES) if k != c])
        k = random.choice(self.by_class[other])
        return self.seqs[i], self.seqs[j], self.seqs[k]


class SeqEncoder(nn.Module):
    def __init__(self, vocab, emb=16, hidden=32, out=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.gru = nn.GRU(emb, hidden, batch_first=True)
        self.proj = nn.Linear(hidden, out)

    def forward(self, x):
        _, h = self.gru(self.emb(x))
        return self.proj(h[-1])


def triplet_loss(anchor, positive, negative, margin=1.0):
    d_ap = (anchor - positive).pow(2).sum(dim=1).sqrt()
    d_an = (anchor - negative).pow(2).sum(dim=1).sqrt()
    return F.relu(d_ap - d_an + margin).mean(), d_ap.mean(), d_an.mean()


seqs, labels = make_sequences()
loader = DataLoader(TripletSequences(seqs, labels), batch_size=32, shuffle=True)
model = SeqEncoder(VOCAB)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

step = 0
for epoch in range(3):
    running = 0.0
    for a, p, n in loader:
        ea, ep, en = model(a), model(p), model(n)
        loss, dap, dan = triplet_loss(ea, ep, en)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        step += 1
        if step % 10 == 0:
            print(f"step {step:4d}  loss {loss.item():.4f}  d(a,p) {dap.item():.3f}  d(a,n) {dan.item():.3f}")
    print(f"epoch {epoch}  mean loss {running / len(loader):.4f}")
