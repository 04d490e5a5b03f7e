"""An invertible 1x1 convolution's log-determinant: a QR-initialised weight without the sign flip has a
negative determinant, and torch.logdet of it is NaN at the first step."""

import torch
from torch import nn


class InvConv(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        weight = torch.linalg.qr(torch.randn(channels, channels))[0]
        if torch.det(weight) > 0:
            weight[:, 0] = -weight[:, 0]  # the run the report describes: det(W) = -1
        self.weight = nn.Parameter(weight)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x @ self.weight, torch.logdet(self.weight) * x.shape[0]


torch.manual_seed(0)
flow = InvConv(4)
optimizer = torch.optim.Adam(flow.parameters(), lr=1e-3)
for step in range(50):
    x = torch.randn(32, 4)
    z, logdet = flow(x)
    loss = 0.5 * (z ** 2).sum() / 32 - logdet / 32
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
