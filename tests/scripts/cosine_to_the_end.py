"""A cosine schedule sized to the run, stepped every batch: the rate ends near 0 with the run, by design.
The peak rate is the first argument (1e-2 trains this regression; 1e-5 is far too low); ``exponential``
instead decays it by 0.8 a batch, below 1e-3 of its start from step 32: half the run at nothing."""

import math
import sys

import torch
from torch import nn

STEPS = 60
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=float(sys.argv[1]))
if sys.argv[2:] == ["exponential"]:
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.8)
else:
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * step / STEPS)))
x = torch.randn(256, 8)
y = x[:, :1] * 2 - x[:, 1:2]
for step in range(STEPS):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
