"""A custom autograd Function and in-place ops (ReLU(inplace=True), ``mul_``, ``add_``)."""

import torch
from torch import nn


class ScaledSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * scale

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (x,) = ctx.saved_tensors
        return grad * 2 * x * ctx.scale, None


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(4, 8)
        self.act = nn.ReLU(inplace=True)
        self.second = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.first(x)
        h.mul_(0.5).add_(0.1)
        h = self.act(h)
        return self.second(ScaledSquare.apply(h, 0.3))


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(24, 4), torch.randn(24, 1)
for step in range(1, 7):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item()!r}")
