"""A regression whose hand-written loss compares (N, 1) predictions with (N,) targets."""

import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(64, 4)
y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0])
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(8):
    pred = model(x)
    loss = ((pred - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("loss", loss.item())
