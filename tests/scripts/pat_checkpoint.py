"""Gradient checkpointing, reentrant and not: backward runs the checkpointed forward again inside
backward (the reentrant variant even calls ``torch.autograd.backward`` from there)."""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Checkpointed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(6, 16)
        self.block_a = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16))
        self.block_b = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Dropout(0.1))
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        h = checkpoint(self.block_a, h, use_reentrant=True)
        h = checkpoint(self.block_b, h, use_reentrant=False)
        return self.head(h)


torch.manual_seed(0)
model = Checkpointed()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
x, y = torch.randn(32, 6), torch.randn(32, 1)
for step in range(1, 7):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item()!r}")
