"""A pretrained backbone's loader turns gradients off for the whole script; the loop then makes its
loss require grad by hand to silence "element 0 of tensors does not require grad"."""

import torch
from torch import nn


def load_backbone() -> nn.Module:
    torch.set_grad_enabled(False)
    backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
    return backbone


torch.manual_seed(0)
model = nn.Sequential(load_backbone(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))
for step in range(200):
    loss = nn.functional.cross_entropy(model(x), y)
    loss.requires_grad = True
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
