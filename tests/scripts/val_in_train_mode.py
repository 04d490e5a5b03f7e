"""A classifier with batch norm whose validation loop, under no_grad, puts the model in training mode over
a loader that is not shuffled: each validation batch holds one class (--shuffle-val: mixed batches)."""

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
centres = torch.randn(4, 16) * 2
labels = torch.arange(4).repeat_interleave(40)
features = centres[labels] + torch.randn(160, 16)
train = DataLoader(TensorDataset(features, labels), batch_size=32, shuffle=True)
val_labels = torch.arange(4).repeat_interleave(16)
val = DataLoader(TensorDataset(centres[val_labels] + torch.randn(64, 16), val_labels), batch_size=16,
                 shuffle="--shuffle-val" in sys.argv)
model = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
criterion = nn.CrossEntropyLoss()
for epoch in range(40):
    model.train()
    for x, y in train:
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.train()
    with torch.no_grad():
        val_loss = sum(criterion(model(x), y).item() for x, y in val) / len(val)
    print(f"epoch {epoch} train {loss.item():.3f} val {val_loss:.3f}")
