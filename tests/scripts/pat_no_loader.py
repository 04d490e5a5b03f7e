"""No DataLoader at all: a hand-written loop over slices of tensors, with a scheduler."""

import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(64, 6)
y = (x[:, :1] - 2 * x[:, 1:2]).clone()
model = nn.Sequential(nn.Linear(6, 12), nn.GELU(), nn.Linear(12, 1))
optimizer = torch.optim.RMSprop(model.parameters(), lr=0.01)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
step = 0
for epoch in range(2):
    order = torch.randperm(len(x))
    for start in range(0, len(x), 16):
        index = order[start:start + 16]
        loss = nn.functional.smooth_l1_loss(model(x[index]), y[index])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        step += 1
        print(f"step {step} loss {loss.item()!r} lr {scheduler.get_last_lr()[0]!r}")
