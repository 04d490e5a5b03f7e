"""Gradient accumulation: four backward calls per optimizer step, the loss divided by four.

The step's loss printed is the mean of the values that went backward, which is what the agent
reports for a step with several backward calls."""

import torch
from torch import nn

ACCUMULATE = 4
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(96, 5), torch.randn(96, 1)
step = 0
backwarded = []
for index, start in enumerate(range(0, len(x), 4)):
    loss = nn.functional.mse_loss(model(x[start:start + 4]), y[start:start + 4]) / ACCUMULATE
    loss.backward()
    backwarded.append(loss.item())
    if (index + 1) % ACCUMULATE == 0:
        optimizer.step()
        optimizer.zero_grad()
        step += 1
        print(f"step {step} loss {sum(backwarded) / len(backwarded)!r} accumulated {sum(backwarded)!r}")
        backwarded = []
