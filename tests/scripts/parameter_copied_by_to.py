"""A layer converts its weight after wrapping it: nn.Parameter(t).to(dtype) keeps a copy, and the Parameter
itself is registered nowhere; the copy passes its gradient to a tensor no optimizer holds."""

import torch
from torch import nn


class Dense(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, 1) * 0.01).to(dtype=torch.float64)
        self.bias = nn.Parameter(torch.zeros(1, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight + self.bias


torch.manual_seed(0)
model = Dense(8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 8, dtype=torch.float64)
y = (x[:, :1] > 0).double()
for step in range(200):
    loss = nn.functional.binary_cross_entropy_with_logits(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
