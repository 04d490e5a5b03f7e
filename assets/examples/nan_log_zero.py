"""Unsafe math in a custom loss: a hand-written binary cross-entropy takes log(1 - p).

As the classifier grows confident, sigmoid(logit) rounds to exactly 1.0 in float32, log(1 - p)
is -inf, and 0 * -inf makes the loss NaN. The fix is the logits form of the loss.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(1024, 6) * 4
y = (x[:, 0] > 0).float()[:, None]
loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True,
                    generator=torch.Generator().manual_seed(0))
model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)


def bce(p, target):
    return -(target * torch.log(p) + (1 - target) * torch.log(1 - p)).mean()


for epoch in range(20):
    for xb, yb in loader:
        p = torch.sigmoid(model(xb))
        loss = bce(p, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
