"""A loss helper that always calls backward, shared by the training and the evaluation: the evaluation
runs under torch.no_grad (the model left in training mode), so its loss has no graph and backward raises.
``left_off``: a validation inside the loop turns gradients off for good, and the training's own backward raises."""

import sys

import torch
from torch import nn


def compute_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss.item()


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))
for step in range(12):
    optimizer.zero_grad()
    compute_loss(model, x, y)
    optimizer.step()
    if sys.argv[1:] == ["left_off"] and step == 5:
        torch.set_grad_enabled(False)
with torch.no_grad():
    print("validation loss", compute_loss(model, x, y))
