"""Deterministic training with everything probes must restore: AdamW, StepLR, BatchNorm, Dropout,
a shuffled DataLoader, python and numpy randomness. Prints a checksum of the final state.
Arguments: epochs (default 3), seconds each forward waits (default 0: a probe that must still be
running when it is cancelled)."""

import random
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)
x = torch.randn(256, 12)
y = (x[:, 0] > 0).long()
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)


class Wait(nn.Module):
    def forward(self, x):
        time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
        return x


model = nn.Sequential(Wait(), nn.Linear(12, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)
criterion = nn.CrossEntropyLoss()
epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
for epoch in range(epochs):
    for xb, yb in loader:
        noise = random.random() * 1e-3 + float(np.random.rand()) * 1e-3
        optimizer.zero_grad()
        loss = criterion(model(xb + noise), yb)
        loss.backward()
        optimizer.step()
    scheduler.step()
checksum = sum(float(p.double().sum()) for p in model.state_dict().values())
print(f"checksum {checksum!r} lr {scheduler.get_last_lr()[0]!r} rng {torch.rand(1).item()!r}")
