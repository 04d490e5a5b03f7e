"""torch.compile with the default (inductor) backend, on a tiny model."""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
compiled = torch.compile(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 4)
y = x.sum(dim=1, keepdim=True)
for step in range(1, 6):
    loss = nn.functional.mse_loss(compiled(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item()!r}")
print("weights", repr(sum(p.double().sum().item() for p in model.parameters())))
