"""A linear regression trains calmly at lr 0.01; at step 60 a schedule raises the rate 300x and the
loss climbs for about thirty steps to inf: the rolling checkpoints near the failure are inside the climb."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(2048, 8)
y = x @ torch.randn(8, 1) + 0.1 * torch.randn(2048, 1)
loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 if step < 60 else 300.0)
step = 0
for epoch in range(20):
    for xb, yb in loader:
        loss = nn.functional.mse_loss(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        step += 1
        print(f"step {step} loss {loss.item():.4g}")
