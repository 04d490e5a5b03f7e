"""Predict how many days until a subscriber churns from their last 180 days of app events.

Each user is a variable-length sequence of events (event type, hours since the previous
event, session minutes); an LSTM reads the sequence, its outputs are summed over the
events (total engagement) and a linear head regresses the days-to-churn. Batches are
padded and packed per batch.
"""
import random

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
random.seed(0)

N_USERS = 512
N_EVENT_TYPES = 12
BATCH_SIZE = 32
EPOCHS = 4
LR = 0.003


def make_users(n):
    users = []
    for i in range(n):
        if i == 300:
            length = 1000
        else:
            length = random.randint(8, 40)
        types = torch.randint(0, N_EVENT_TYPES, (length,))
        gaps = torch.rand(length) * 2.0
        minutes = torch.rand(length)
        engagement = (minutes.mean() - 0.5) * 4 + (types < 4).float().mean() * 2 - gaps.mean()
        days = 30 + 10 * engagement + torch.randn(()) * 2
        users.append((types, torch.stack([gaps, minutes], dim=1), days / 30.0))
    return users


class ChurnDataset(Dataset):
    def __init__(self, users):
        self.users = users

    def __len__(self):
        return len(self.users)

    def __getitem__(self, idx):
        return self.users[idx]


def collate(batch):
    types, feats, days = zip(*batch)
    lengths = torch.tensor([len(t) for t in types])
    return (pad_sequence(types, batch_first=True), pad_sequence(feats, batch_first=True),
            lengths, torch.stack(days))


class ChurnLSTM(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.embed = nn.Embedding(N_EVENT_TYPES, 16)
        self.lstm = nn.LSTM(16 + 2, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, types, feats, lengths):
        x = torch.cat([self.embed(types), feats], dim=2)
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True)
        return self.head(out.sum(dim=1)).squeeze(1)


users = make_users(N_USERS)
train_loader = DataLoader(ChurnDataset(users[:448]), batch_size=BATCH_SIZE, shuffle=True,
                          collate_fn=collate)
val_loader = DataLoader(ChurnDataset(users[448:]), batch_size=BATCH_SIZE, collate_fn=collate)

model = ChurnLSTM()
optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
criterion = nn.MSELoss()

step = 0
for epoch in range(EPOCHS):
    model.train()
    running = 0.0
    for types, feats, lengths, days in train_loader:
        optimizer.zero_grad()
        pred = model(types, feats, lengths)
        loss = criterion(pred, days)
        loss.backward()
        optimizer.step()
        step += 1
        running += loss.item()
        if step % 5 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    model.eval()
    val = 0.0
    with torch.no_grad():
        for types, feats, lengths, days in val_loader:
            val += criterion(model(types, feats, lengths), days).item()
    print(f"epoch {epoch} train_mse {running / len(train_loader):.4f} val_mse {val / len(val_loader):.4f}")
