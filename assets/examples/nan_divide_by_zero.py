"""Unsafe math: a loss normalised per sample by a quantity that can be zero.

Each sample's error is divided by the L1 norm of its features; some samples are all zeros (padding
rows), so the division gives inf and NaN. The fix guards the denominator.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(512, 8)
y = x.sum(dim=1, keepdim=True)
x[torch.arange(0, 512, 97)] = 0.0  # padding rows
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True,
                    generator=torch.Generator().manual_seed(0))
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
for epoch in range(3):
    for xb, yb in loader:
        scale = xb.abs().sum(dim=1, keepdim=True)
        loss = ((model(xb) - yb) ** 2 / scale).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
