"""A pipeline that never learns: the model's output is detached before the loss.

The loss still goes backward (the detached output is made to require grad again), so nothing
crashes and no warning appears, but no gradient ever reaches a weight. The single-batch overfit
test catches it at once.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(512, 10)
y = (x[:, 0] > 0).long()
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
criterion = nn.CrossEntropyLoss()

for epoch in range(3):
    for xb, yb in loader:
        logits = model(xb).detach().requires_grad_()  # the bug: the graph is cut here
        loss = criterion(logits, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
