"""Deterministic training with everything probes must restore: AdamW, StepLR, BatchNorm, Dropout,
a shuffled DataLoader, python and numpy randomness. Prints a checksum of the final state."""

import random
import sys

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
model = nn.Sequential(nn.Linear(12, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 2))
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
