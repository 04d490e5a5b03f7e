"""NaN in the data: a few rows of the dataset hold NaN features (a broken sensor, a failed join).

The model and the learning rate are fine; the loss turns NaN on the first batch that holds a bad
row, and NaN weights follow.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(1024, 8)
y = x @ torch.randn(8, 1)
x[[37, 301, 777], 2] = float("nan")
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True,
                    generator=torch.Generator().manual_seed(0))
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    for xb, yb in loader:
        loss = nn.functional.mse_loss(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
