"""Predict (normalised) peptide retention times with an LSTM over the amino-acid sequence.

Synthetic peptides: the retention time is a hydrophobicity index (a sum of
per-residue coefficients, with a length term), scaled to [0, 1] as in the
tutorial, so the sequence fully determines the target.
"""
import random

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

random.seed(3)
np.random.seed(3)
torch.manual_seed(3)

AA = "ACDEFGHIKLMNPQRSTVWY"
aa_to_idx = {a: i + 1 for i, a in enumerate(AA)}
hydrophobicity = dict(zip(AA, np.linspace(-1.0, 1.0, len(AA)) * np.random.permutation(len(AA)) / 10))
max_len = 20


def random_peptide():
    return "".join(random.choice(AA) for _ in range(random.randint(7, max_len)))


def retention_index(seq):
    return sum(hydrophobicity[a] for a in seq) + 0.05 * len(seq)


class PeptideDataset(Dataset):
    def __init__(self, peptides, rt):
        self.peptides = peptides
        self.rt = rt

    def __len__(self):
        return len(self.peptides)

    def __getitem__(self, idx):
        seq = self.peptides[idx]
        x = torch.zeros(max_len, dtype=torch.long)
        x[:len(seq)] = torch.tensor([aa_to_idx[a] for a in seq])
        return x, len(seq), torch.tensor([self.rt[idx]], dtype=torch.float32)


class RTModel(nn.Module):
    def __init__(self, emb_dim=32, hidden=64):
        super().__init__()
        self.embedding = nn.Embedding(len(AA) + 1, emb_dim, padding_idx=0)
        self.lstm = nn.LSTM(emb_dim, hidden, batch_first=True)
        self.regressor = nn.Sequential(
            nn.Linear(hidden, 32),
            nn.ReLU(),
            nn.Linear(32, 1),
            nn.ReLU(),
        )

    def forward(self, x, lengths):
        emb = self.embedding(x)
        packed = nn.utils.rnn.pack_padded_sequence(emb, lengths, batch_first=True, enforce_sorted=False)
        _, (h_n, _) = self.lstm(packed)
        return self.regressor(h_n[-1])


peptides = [random_peptide() for _ in range(2400)]
rt = np.array([retention_index(p) for p in peptides])
rt = (rt - rt.min()) / (rt.max() - rt.min())
train_ds = PeptideDataset(peptides[:2000], rt[:2000])
val_ds = PeptideDataset(peptides[2000:], rt[2000:])
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=400)

model = RTModel()
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

step = 0
for epoch in range(5):
    model.train()
    for x, lengths, y in train_loader:
        optimizer.zero_grad()
        pred = model(x, lengths)
        loss = criterion(pred, y)
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"epoch {epoch} step {step:4d}  mse {loss.item():.5f}")
        step += 1

    model.eval()
    preds, targets = [], []
    with torch.no_grad():
        for x, lengths, y in val_loader:
            preds.append(model(x, lengths))
            targets.append(y)
    preds, targets = torch.cat(preds).squeeze(1), torch.cat(targets).squeeze(1)
    val_mse = criterion(preds, targets).item()
    corr = np.corrcoef(preds.numpy(), targets.numpy())[0, 1] if preds.std() > 0 else float("nan")
    print(f"== epoch {epoch}: val mse {val_mse:.5f}  pearson r {corr:.3f}  "
          f"pred range [{preds.min():.3f}, {preds.max():.3f}]")
