"""Two stages, each with its own optimizer: pre-training, then a fine-tune with a new one (the first
one still referenced, as in a script that keeps it)."""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
x, y = torch.randn(64, 4), torch.randn(64, 1)
optimizers = [torch.optim.SGD(model.parameters(), lr=0.05), torch.optim.Adam(model.parameters(), lr=1e-3)]
for stage, (optimizer, steps) in enumerate(zip(optimizers, (30, 40))):
    for step in range(1, steps + 1):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        print(f"stage {stage} step {step} loss {loss.item()!r}")
