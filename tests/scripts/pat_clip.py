"""Clips its gradients every step, as word_language_model does, and prints what clip_grad_norm_ returned."""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(10, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 10) * 100, torch.randn(64, 1)
for step in range(1, 21):
    optimizer.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    norm = nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    optimizer.step()
    print(f"step {step} clip returned {norm.item()!r}", flush=True)
