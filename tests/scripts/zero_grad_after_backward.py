"""A regression loop with optimizer.zero_grad() between backward() and step(): every step applies nothing."""

import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(256, 8)
y = x @ torch.randn(8, 1)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(40):
    rows = torch.randint(0, 256, (32,))
    loss = nn.functional.mse_loss(model(x[rows]), y[rows])
    loss.backward()
    optimizer.zero_grad()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
